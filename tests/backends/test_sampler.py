"""The sampling loop's parts on real tensors and a tiny GPT-2: the top-k nucleus equals the
full-sort nucleus, the draw's log-probs are its distribution's, the KV cache is written in
place, and finished rows leave the batch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

from qdevolve.backends._sampler import draw, new_cache, nucleus, nucleus_topk, sample_rows  # noqa: E402


def tiny(seed: int = 0) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=300, n_layer=2, n_embd=32, n_head=2, n_positions=128)
    return GPT2LMHeadModel(cfg).eval()


@pytest.mark.parametrize("scale", [0.1, 1.0, 8.0])  # flat (k grows to the vocabulary) to peaked
@pytest.mark.parametrize("top_p", [0.3, 0.9, 0.999])
def test_topk_nucleus_keeps_the_same_tokens_as_the_full_sort(scale, top_p):
    g = torch.Generator().manual_seed(int(scale * 10 + top_p * 1000))
    scores = torch.randn((6, 5000), generator=g) * scale
    values, index = nucleus_topk(scores, top_p, k=16)
    ref = nucleus(scores, top_p)
    kept = torch.full_like(scores, float("-inf")).scatter(-1, index, values)
    assert torch.equal(torch.isfinite(kept), torch.isfinite(ref))
    assert torch.equal(kept[torch.isfinite(kept)], ref[torch.isfinite(ref)])


def test_draw_returns_the_log_prob_of_its_distribution_and_never_a_masked_column():
    g = torch.Generator().manual_seed(0)
    scores = torch.tensor([[0.0, 1.0, float("-inf"), 2.0]]).repeat(20000, 1)
    col, logp = draw(scores, g)
    assert not (col == 2).any()
    ref = torch.log_softmax(scores, -1)
    assert torch.allclose(logp, ref.gather(-1, col), atol=1e-6)
    freq = torch.bincount(col.squeeze(-1), minlength=4).float() / col.numel()
    assert torch.allclose(freq, ref[0].exp(), atol=0.015), freq


def test_the_kv_cache_is_written_in_place_not_concatenated():
    model = tiny()
    cache = new_cache(capacity=20)
    ids = torch.randint(0, 300, (3, 5))
    with torch.no_grad():
        out = model(input_ids=ids, past_key_values=cache, use_cache=True)
        layer = cache.layers[0]
        ptr = layer.keys.data_ptr()
        for _ in range(4):
            out = model(input_ids=ids[:, :1], past_key_values=cache, use_cache=True)
    assert cache.get_seq_length() == 9 and layer.keys.shape[-2] == 9
    assert layer.keys.data_ptr() == ptr  # the same buffer after 4 steps: nothing was copied
    # the cached forward equals an uncached one over the whole sequence
    full = torch.cat([ids] + [ids[:, :1]] * 4, dim=1)
    with torch.no_grad():
        ref = model(input_ids=full).logits[:, -1]
    assert torch.allclose(out.logits[:, -1], ref, atol=1e-5)


def test_a_cache_grows_past_its_planned_capacity_without_losing_positions():
    model = tiny()
    cache = new_cache(capacity=4)
    ids = torch.randint(0, 300, (2, 6))
    with torch.no_grad():
        model(input_ids=ids[:, :3], past_key_values=cache, use_cache=True)
        out = model(input_ids=ids[:, 3:], past_key_values=cache, use_cache=True)
        ref = model(input_ids=ids).logits
    assert cache.get_seq_length() == 6
    assert torch.allclose(out.logits, ref[:, 3:], atol=1e-5)


def test_finished_rows_leave_the_batch():
    """Greedy rows of two prompts; the token row 0 emits third becomes EOS: row 0 stops there
    and every later forward pass runs on fewer rows."""
    model = tiny()
    prompts, rows = [[5, 6, 7], [9, 10, 11, 12, 13]], [0, 1]
    kw = dict(temperature=0.0, top_p=1.0, max_new=8, pad=0, stops=[], decode=lambda x: "", generator=None)
    free = sample_rows(model, prompts, rows, eos=None, **kw)
    eos = free[0].ids[2]
    assert eos not in free[1].ids[:8] or free[1].ids.index(eos) > 2, "pick another prompt: both rows stop together"
    batches: list[int] = []
    hook = model.register_forward_pre_hook(lambda m, a, k: batches.append(k["input_ids"].shape[0]), with_kwargs=True)
    try:
        out = sample_rows(model, prompts, rows, eos=eos, **kw)
    finally:
        hook.remove()
    first = free[0].ids.index(eos)
    assert out[0].ids == free[0].ids[: first + 1] and out[0].finish == "stop"
    assert out[1].ids[: first + 1] == free[1].ids[: first + 1]
    assert batches[0] == 2 and batches[1 : first + 1] == [2] * first  # prefill, then both rows until row 0's EOS
    assert set(batches[first + 1 :]) <= {1} and len(batches) > first + 1
