"""TransformersBackend with a tiny GPT-2 built from config and a file-free byte tokenizer."""

from __future__ import annotations

import asyncio

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import ByT5Tokenizer, GPT2Config, GPT2LMHeadModel  # noqa: E402
from transformers.generation import TopPLogitsWarper  # noqa: E402

from qdevolve import registry  # noqa: E402
from qdevolve.backends.base import GenerationRequest  # noqa: E402
from qdevolve.backends.transformers_backend import TransformersBackend, render_messages  # noqa: E402


def tiny_model(seed: int = 0) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=384, n_layer=2, n_embd=32, n_head=2, n_positions=256, bos_token_id=1, eos_token_id=1)
    return GPT2LMHeadModel(cfg)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-gpt2")
    tiny_model().save_pretrained(path)
    ByT5Tokenizer().save_pretrained(path)
    return path


def recompute(model, prompt_ids, ids, temperature, top_p):
    """Log-probs of ``ids`` after ``prompt_ids`` from a fresh forward pass, same processing."""
    seq = torch.tensor([prompt_ids + ids])
    model.eval()  # no dropout, as when sampling
    with torch.no_grad():
        logits = model(seq).logits[0, len(prompt_ids) - 1 : len(prompt_ids) + len(ids) - 1].float()
    scores = logits / temperature
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(seq, scores)
    return torch.log_softmax(scores, -1).gather(1, torch.tensor(ids).unsqueeze(1)).squeeze(1)


@pytest.mark.parametrize(("temperature", "top_p"), [(0.8, 1.0), (1.3, 0.9)])
def test_token_ids_and_logprobs_match_recomputation(saved, temperature, top_p):
    backend = TransformersBackend(str(saved), max_new_tokens=12, batch_size=3)
    reqs = [
        GenerationRequest(messages=[{"role": "user", "content": "pack circles"}], n=2, temperature=temperature, top_p=top_p, seed=1),
        GenerationRequest(prompt="def f():", n=2, temperature=temperature, top_p=top_p, seed=1),
    ]
    out = asyncio.run(backend.generate(reqs))
    assert [len(x) for x in out] == [2, 2]
    for comps in out:
        for c in comps:
            assert c.token_ids and len(c.logprobs) == len(c.token_ids) == c.completion_tokens
            assert c.prompt_token_ids and c.prompt_tokens == len(c.prompt_token_ids)
            assert c.finish_reason in ("stop", "length") and c.model == str(saved)
            ref = recompute(backend.model, c.prompt_token_ids, c.token_ids, temperature, top_p)
            assert torch.allclose(torch.tensor(c.logprobs), ref, atol=1e-4), (c.logprobs, ref.tolist())
            assert all(lp <= 0 for lp in c.logprobs)
    assert out[1][0].prompt_token_ids == [b + 3 for b in b"def f():"]  # ByT5: byte + 3 specials


def test_seed_makes_sampling_reproducible_and_greedy_is_deterministic(saved):
    backend = TransformersBackend(str(saved), max_new_tokens=8)
    r = GenerationRequest(prompt="abc", n=2, temperature=1.0, seed=5)
    a, b = backend.generate_sync([r]), backend.generate_sync([r])
    assert [c.token_ids for c in a[0]] == [c.token_ids for c in b[0]]
    g = GenerationRequest(prompt="abc", n=2, temperature=0.0)
    ga = backend.generate_sync([g])[0]
    assert ga[0].token_ids == ga[1].token_ids
    ref = recompute(backend.model, ga[0].prompt_token_ids, ga[0].token_ids, 1.0, 1.0)
    assert torch.allclose(torch.tensor(ga[0].logprobs), ref, atol=1e-4)


def test_requests_with_different_seeds_share_one_batch_and_each_keeps_its_stream(saved, monkeypatch):
    """Every LLM mutator sends its own seed: such requests must still batch together (one
    sampling call), and each request's rows must equal what it gets when sampled alone."""
    backend = TransformersBackend(str(saved), max_new_tokens=8)
    reqs = [GenerationRequest(prompt=p, n=2, temperature=1.0, seed=s) for p, s in (("abc", 5), ("xyz", 11), ("abc", 7))]
    alone = [backend.generate_sync([r])[0] for r in reqs]
    calls = []
    real = backend._sample
    monkeypatch.setattr(backend, "_sample", lambda texts, key, seeds: calls.append(len(texts)) or real(texts, key, seeds))
    together = backend.generate_sync(reqs)
    assert calls == [6]  # one batch of 3 requests x 2 rows
    for a, t in zip(alone, together, strict=True):
        assert [c.token_ids for c in a] == [c.token_ids for c in t]
        for ca, ct in zip(a, t, strict=True):
            assert ca.logprobs == pytest.approx(ct.logprobs, abs=1e-4)
    assert [c.token_ids for c in together[0]] != [c.token_ids for c in together[2]]  # same prompt, other seed


def test_concurrent_generate_calls_share_one_sampling_batch(saved, monkeypatch):
    """The engine sends one request per plan, several plans at once: they must be sampled
    together (one ``_sample`` call), each caller getting its own rows, equal to a lone call's."""
    backend = TransformersBackend(str(saved), max_new_tokens=8, batch_size=8)
    reqs = [GenerationRequest(prompt=p, n=1, temperature=1.0, seed=s) for p, s in (("abc", 5), ("xyz", 11), ("k", 3))]
    alone = [backend.generate_sync([r])[0][0].token_ids for r in reqs]
    calls = []
    real = backend._sample
    monkeypatch.setattr(backend, "_sample", lambda texts, key, seeds: calls.append(len(texts)) or real(texts, key, seeds))

    async def plans():
        return await asyncio.gather(*(backend.generate([r]) for r in reqs))

    out = asyncio.run(plans())
    assert calls == [3], "three concurrent one-request calls sampled as one batch"
    assert [o[0][0].token_ids for o in out] == alone
    assert asyncio.run(plans()) and calls == [3, 3]  # a second event loop works as well


def test_in_process_update_is_seen_by_the_next_call_and_load_policy(saved, tmp_path):
    tok = ByT5Tokenizer()
    model = tiny_model()
    backend = TransformersBackend(model, tok, max_new_tokens=6, name="tiny")
    r = GenerationRequest(prompt="xyz", temperature=0.0)
    before = backend.generate_sync([r])[0][0]
    with torch.no_grad():  # a "trainer step" on the same object
        model.lm_head.weight.add_(torch.randn_like(model.lm_head.weight))
    backend.load_policy(1, None)
    after = backend.generate_sync([r])[0][0]
    assert after.policy_version == 1 and before.policy_version is None
    assert after.logprobs != before.logprobs
    # a saved HF directory
    other = tiny_model(seed=7)
    other.save_pretrained(tmp_path / "v2")
    backend.load_policy(2, str(tmp_path / "v2"))
    c = backend.generate_sync([r])[0][0]
    assert c.policy_version == 2
    ref = recompute(other, c.prompt_token_ids, c.token_ids, 1.0, 1.0)
    assert torch.allclose(torch.tensor(c.logprobs), ref, atol=1e-4)
    with pytest.raises(FileNotFoundError, match="policy version 3"):
        backend.load_policy(3, str(tmp_path / "missing"))


def test_peft_adapter_versions(tmp_path):
    peft = pytest.importorskip("peft")
    base = tiny_model()
    lora = peft.get_peft_model(tiny_model(), peft.LoraConfig(r=2, target_modules=["c_attn"], fan_in_fan_out=True, init_lora_weights=False))
    lora.save_pretrained(tmp_path / "adapter")
    backend = TransformersBackend(base, ByT5Tokenizer(), max_new_tokens=5)
    r = GenerationRequest(prompt="hello", temperature=0.0)
    plain = backend.generate_sync([r])[0][0]
    backend.load_policy(4, str(tmp_path / "adapter"))
    adapted = backend.generate_sync([r])[0][0]
    assert adapted.policy_version == 4 and adapted.logprobs != plain.logprobs
    assert isinstance(backend.model, peft.PeftModel) and backend.model.active_adapter == "v4"


def test_stop_strings_and_plain_chat_rendering(saved):
    tok = ByT5Tokenizer()
    assert render_messages([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], tok) == "system: s\nuser: u\nassistant: "
    backend = TransformersBackend(str(saved), max_new_tokens=20)
    full = backend.generate_sync([GenerationRequest(prompt="q", temperature=1.0, seed=3)])[0][0]
    assert full.text, "the random model produced only special tokens; pick another seed"
    stop = full.text[2:4] if len(full.text) >= 4 else full.text[-1]
    cut = backend.generate_sync([GenerationRequest(prompt="q", temperature=1.0, seed=3, stop=[stop])])[0][0]
    assert stop in cut.text and cut.finish_reason == "stop" and len(cut.token_ids) <= len(full.token_ids)
    assert cut.token_ids == full.token_ids[: len(cut.token_ids)] and len(cut.logprobs) == len(cut.token_ids)


def test_created_through_the_registry(saved):
    with registry.snapshot():
        b = registry.backend.create({"type": "transformers", "model": str(saved), "max_new_tokens": 4})
    assert isinstance(b, TransformersBackend) and "tiny-gpt2" in repr(b)


@pytest.mark.slow
def test_smollm2_groups_share_a_prefill_and_keep_exact_logprobs(smollm2_dir):
    """Two prompts of different lengths (so one is left-padded), two rows each from one
    prefill: every row's log-probs equal an unpadded, uncached forward pass, and the rows of
    one prompt differ (they are sampled independently after the shared prefix)."""
    backend = TransformersBackend("smollm2-135m-instruct", max_new_tokens=8, batch_size=4)
    assert backend.name == "smollm2-135m-instruct"
    reqs = [GenerationRequest(messages=[{"role": "user", "content": "Write a haiku."}], n=2, temperature=1.0, seed=3),
            GenerationRequest(messages=[{"role": "user", "content": "Write a Python function that sorts a list "
                                                                    "of tuples by their second item."}],
                              n=2, temperature=1.0, top_p=0.9, seed=3)]
    out = backend.generate_sync(reqs)
    assert len(out[0][0].prompt_token_ids) < len(out[1][0].prompt_token_ids)
    for comps, top_p in zip(out, (1.0, 0.9), strict=True):
        for c in comps:
            ref = recompute(backend.model, c.prompt_token_ids, c.token_ids, 1.0, top_p)
            assert torch.allclose(torch.tensor(c.logprobs), ref, atol=2e-3), (c.logprobs, ref.tolist())
    assert len({tuple(c.token_ids) for comps in out for c in comps}) == 4
