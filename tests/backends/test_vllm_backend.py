"""VLLMBackend: the request/response mapping without vllm; the engine under marker gpu."""

from __future__ import annotations

import asyncio
import importlib.util
import math
from dataclasses import dataclass, field

import pytest

from qdevolve.backends.base import GenerationRequest
from qdevolve.backends.vllm_backend import (
    VLLMBackend,
    completions_from_output,
    lora_request_args,
    sampling_params_kwargs,
)
from qdevolve.errors import PluginError

HAVE_VLLM = importlib.util.find_spec("vllm") is not None


@dataclass
class Logprob:  # the shape of vllm.sequence.Logprob
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:  # the shape of vllm.outputs.CompletionOutput
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = "stop"


@dataclass
class RequestOutput:  # the shape of vllm.outputs.RequestOutput
    request_id: str
    prompt: str
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)


def test_sampling_params_kwargs():
    r = GenerationRequest(prompt="x", n=3, temperature=0.6, top_p=0.9, max_tokens=5000, seed=11, stop=["\n\n"])
    assert sampling_params_kwargs(r, max_tokens_cap=1024) == {
        "n": 3, "temperature": 0.6, "top_p": 0.9, "max_tokens": 1024, "seed": 11, "stop": ["\n\n"], "logprobs": 0,
    }
    greedy = sampling_params_kwargs(GenerationRequest(prompt="x", temperature=0.0, top_p=0.5, max_tokens=7), logprobs=False)
    assert greedy == {"n": 1, "temperature": 0.0, "top_p": 1.0, "max_tokens": 7}


def test_completions_from_request_output():
    out = RequestOutput("r1", "p", [5, 6, 7], [
        CompletionOutput(1, "b", [9], -0.5, [{9: Logprob(-0.5, 1), 3: Logprob(-2.0, 2)}], "length"),
        CompletionOutput(0, "ab", [1, 2], -0.3, [{1: Logprob(-0.1)}, {2: Logprob(-0.2)}], "stop"),
    ])
    comps = completions_from_output(out, policy_version=3, model="base", latency_s=0.5)
    assert [c.text for c in comps] == ["ab", "b"]  # ordered by choice index
    a, b = comps
    assert a.token_ids == [1, 2] and a.logprobs == [-0.1, -0.2] and a.finish_reason == "stop"
    assert b.logprobs == [-0.5] and b.finish_reason == "length"
    assert a.prompt_token_ids == [5, 6, 7] and a.prompt_tokens == 3 and a.completion_tokens == 2
    assert a.policy_version == 3 and a.model == "base" and a.latency_s == 0.5
    no_lp = completions_from_output(RequestOutput("r", "p", [1], [CompletionOutput(0, "x", [4], None, None, None)]),
                                    policy_version=None, model="m")
    assert no_lp[0].logprobs == [] and no_lp[0].finish_reason == "stop"
    missing = completions_from_output(RequestOutput("r", "p", [1], [CompletionOutput(0, "x", [4], None, [{8: Logprob(-1.0)}])]),
                                      policy_version=None, model="m")
    assert math.isnan(missing[0].logprobs[0])


def test_lora_request_args(tmp_path):
    """A LoRA request names an adapter directory (more in tests/backends/test_adapter_swap.py)."""
    from qdevolve.errors import ConfigError

    for v in (0, 7):
        (tmp_path / f"v{v}").mkdir()
        (tmp_path / f"v{v}" / "adapter_config.json").write_text("{}")
        (tmp_path / f"v{v}" / "adapter_model.safetensors").write_bytes(b"")
    assert lora_request_args(0, tmp_path / "v0") == ("policy-v0", 1, str(tmp_path / "v0"))
    assert lora_request_args(7, str(tmp_path / "v7"))[1] == 8
    with pytest.raises(ValueError):
        lora_request_args(-1, tmp_path / "v0")
    with pytest.raises(ConfigError, match="not a policy version"):
        lora_request_args(1, tmp_path / "missing")


@pytest.mark.skipif(HAVE_VLLM, reason="vllm is installed")
def test_missing_vllm_names_the_extra():
    with pytest.raises(PluginError, match=r"qdevolve\[vllm\]"):
        VLLMBackend("some/model")


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_VLLM, reason="needs the vllm extra")
def test_engine_generates_with_logprobs(tmp_path):
    from transformers import ByT5Tokenizer, GPT2Config, GPT2LMHeadModel

    # no downloads: a tiny model built from config and a file-free byte tokenizer
    GPT2LMHeadModel(GPT2Config(vocab_size=384, n_layer=2, n_embd=64, n_head=2, n_positions=512)).save_pretrained(tmp_path)
    ByT5Tokenizer().save_pretrained(tmp_path)
    backend = VLLMBackend(str(tmp_path), lora=False, max_new_tokens=8,
                          engine_kwargs={"gpu_memory_utilization": 0.2, "max_model_len": 256, "enforce_eager": True})
    out = asyncio.run(backend.generate([GenerationRequest(prompt="hello", n=2, temperature=1.0, seed=0, max_tokens=8)]))
    assert len(out[0]) == 2
    for c in out[0]:
        assert c.token_ids and len(c.logprobs) == len(c.token_ids) and all(lp <= 0 for lp in c.logprobs)
    backend.close()
