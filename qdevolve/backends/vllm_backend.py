"""Backend ``vllm``: an offline ``vllm.LLM`` engine, LoRA adapters swapped per policy version.

``vllm`` is imported when the backend is built (install the ``vllm`` extra). With
``lora=True`` the base model stays loaded and each policy version is a LoRA adapter
directory, the very directory the trainer saved (:mod:`qdevolve.backends.adapters`), sent as
``LoRARequest(name, int_id, path)`` with every request after :meth:`load_policy`; the
request's arguments come from the pure :func:`lora_request_args`, which refuses a full model
directory and an adapter recording another base than the engine's (when the engine's model
is a local directory). With ``lora=False`` a policy version is a full model directory and the
engine is rebuilt.

Log-probs: the engine is started with ``logprobs_mode="processed_logprobs"`` so the
returned log-prob of each sampled token is taken after temperature and top-p, i.e. under
the distribution it was sampled from (the behaviour policy), matching the ``transformers``
backend. The request/response mapping is in two pure functions,
:func:`sampling_params_kwargs` and :func:`completions_from_output`, tested without vllm.
"""

from __future__ import annotations

import gc
import threading
import time
from pathlib import Path
from typing import Any

from qdevolve import registry
from qdevolve.backends.adapters import (
    ADAPTER_WEIGHTS,
    BaseIdentity,
    base_identity,
    check_base,
    read_meta,
    version_kind,
)
from qdevolve.backends.base import Completion, GenerationRequest
from qdevolve.backends.coalesce import RequestCoalescer
from qdevolve.errors import ConfigError, PluginError

__all__ = ["VLLMBackend", "sampling_params_kwargs", "completions_from_output", "lora_request_args", "engine_base"]


def sampling_params_kwargs(req: GenerationRequest, *, max_tokens_cap: int | None = None, logprobs: bool = True) -> dict[str, Any]:
    """``vllm.SamplingParams(**kwargs)`` for one request.

    ``logprobs=0`` asks vLLM for the sampled token's log-prob only (no top-k alternatives).
    """
    max_tokens = int(req.max_tokens) if max_tokens_cap is None else min(int(req.max_tokens), int(max_tokens_cap))
    kw: dict[str, Any] = {
        "n": max(1, int(req.n)),
        "temperature": float(req.temperature),
        "top_p": float(req.top_p) if req.temperature > 0 else 1.0,
        "max_tokens": max_tokens,
    }
    if req.seed is not None:
        kw["seed"] = int(req.seed)
    if req.stop:
        kw["stop"] = list(req.stop)
    if logprobs:
        kw["logprobs"] = 0
    return kw


def lora_request_args(version: int, path: str | Path, base: BaseIdentity | None = None) -> tuple[str, int, str]:
    """``(lora_name, lora_int_id, lora_path)`` for ``vllm.lora.request.LoRARequest`` (ids are >= 1).

    ``path`` must be an adapter directory (the trainer's policy versions of a LoRA run:
    :mod:`qdevolve.backends.adapters`) whose ``adapter_config.json`` and weights vLLM can read
    as they are (safetensors weights; no ``.bin``). With ``base`` (the engine's base model
    identity) an adapter recording another base is refused; vLLM itself would apply any adapter
    of matching shapes. A pure function: no vLLM needed.

    Raises:
        ValueError: a negative version.
        ConfigError: ``path`` is not an adapter directory, or was trained on another base.
    """
    if version < 0:
        raise ValueError(f"policy versions are >= 0, got {version}")
    p = Path(path).absolute()
    if version_kind(p) != "adapter":
        raise ConfigError(f"policy version {version}: {p} is a full model directory, not a LoRA adapter; serve it "
                          "with lora: false (the engine is rebuilt per version), or train with use_lora")
    if not (p / ADAPTER_WEIGHTS).is_file():
        raise ConfigError(f"policy version {version}: {p} has no {ADAPTER_WEIGHTS} (safetensors weights only)")
    meta = read_meta(p)
    if base is not None:
        check_base(meta, base, directory=p, version=version)
    return f"policy-v{version}", version + 1, str(p)


def engine_base(model: str) -> BaseIdentity | None:
    """The identity of the engine's base when ``model`` is a local model directory, else ``None``
    (a hub id: vLLM's business; adapters are then not checked against it)."""
    p = Path(model)
    return base_identity(p) if (p / "config.json").is_file() else None


def _token_logprob(step: Any, token_id: int) -> float:
    """The log-prob of ``token_id`` in one step's ``{token_id: Logprob}`` mapping."""
    entry = step.get(token_id) if isinstance(step, dict) else None
    if entry is None:
        return float("nan")
    return float(getattr(entry, "logprob", entry))


def completions_from_output(output: Any, *, policy_version: int | None, model: str, latency_s: float = 0.0) -> list[Completion]:
    """Our completions from one vLLM ``RequestOutput`` (``prompt_token_ids``, ``outputs``).

    Each ``CompletionOutput`` gives ``text``, ``token_ids``, ``finish_reason`` and, when
    requested, ``logprobs``: a list (one per generated token) of ``{token_id: Logprob}``.
    """
    prompt_ids = list(getattr(output, "prompt_token_ids", None) or [])
    comps = []
    for o in sorted(output.outputs, key=lambda o: getattr(o, "index", 0)):
        ids = list(o.token_ids or [])
        steps = getattr(o, "logprobs", None) or []
        lps = [_token_logprob(s, t) for s, t in zip(steps, ids, strict=False)] if steps else []
        comps.append(
            Completion(
                text=o.text or "",
                token_ids=ids,
                logprobs=lps,
                prompt_token_ids=prompt_ids,
                finish_reason=o.finish_reason or "stop",
                prompt_tokens=len(prompt_ids),
                completion_tokens=len(ids),
                policy_version=policy_version,
                model=model,
                latency_s=latency_s,
            )
        )
    return comps


@registry.backend("vllm")
class VLLMBackend:
    """Offline vLLM generation.

    Args:
        model: Base model directory or hub id.
        lora: Serve policy versions as LoRA adapters (else full-weight reloads).
        max_lora_rank: Largest adapter rank the engine accepts.
        max_new_tokens: Cap on generated tokens.
        logprobs: Return the sampled tokens' log-probs.
        engine_kwargs: Extra ``vllm.LLM`` arguments (``gpu_memory_utilization``,
            ``tensor_parallel_size``, ``dtype``, ``max_model_len``...).
    """

    def __init__(
        self,
        model: str,
        *,
        lora: bool = True,
        max_lora_rank: int = 64,
        max_new_tokens: int = 4096,
        logprobs: bool = True,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        try:
            import vllm  # noqa: F401
        except ImportError as exc:
            raise PluginError(
                "backend 'vllm' needs the vllm package, which is not installed: "
                "pip install 'qdevolve[vllm]' (needs a CUDA GPU); or use backend 'transformers' or 'openai'"
            ) from exc
        self.model_name = model
        self.lora = bool(lora)
        self.max_lora_rank = int(max_lora_rank)
        self.max_new_tokens = int(max_new_tokens)
        self.logprobs = bool(logprobs)
        self.engine_kwargs = dict(engine_kwargs or {})
        self.policy_version: int | None = None
        self._lora_request: Any = None
        self._base: BaseIdentity | None = None  # the engine's base, hashed at the first adapter
        self._lock = threading.Lock()
        self._coalesce = RequestCoalescer(self.generate_sync)
        self.llm = self._build(model)

    def _build(self, model: str) -> Any:
        from vllm import LLM

        kw = {"model": model, "logprobs_mode": "processed_logprobs", **self.engine_kwargs}
        if self.lora:
            kw.setdefault("enable_lora", True)
            kw.setdefault("max_lora_rank", self.max_lora_rank)
        return LLM(**kw)

    def __repr__(self) -> str:
        return f"VLLMBackend(model={self.model_name!r}, lora={self.lora}, policy_version={self.policy_version})"

    def load_policy(self, version: int, path: str | None) -> None:
        """Serve policy ``version``: a LoRA adapter dir (``lora=True``) or a full model dir."""
        if path is not None:
            with self._lock:
                if self.lora:
                    from vllm.lora.request import LoRARequest

                    if self._base is None:
                        self._base = engine_base(self.model_name)
                    self._lora_request = LoRARequest(*lora_request_args(version, path, self._base))
                else:
                    self.close()
                    self.llm = self._build(path)
        self.policy_version = version

    def close(self) -> None:
        """Drop the engine and free GPU memory."""
        self.llm = None
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:  # pragma: no cover
            pass

    async def generate(self, requests: list[GenerationRequest]) -> list[list[Completion]]:
        """All requests in one engine call (vLLM batches them), in a worker thread.

        Concurrent calls (one per plan in flight) are joined into one batched call
        (:class:`~qdevolve.backends.coalesce.RequestCoalescer`).
        """
        return await self._coalesce(requests)

    def generate_sync(self, requests: list[GenerationRequest]) -> list[list[Completion]]:
        """Blocking :meth:`generate`."""
        from vllm import SamplingParams

        from qdevolve.backends.transformers_backend import render_messages

        if not requests:
            return []
        with self._lock:
            if self.llm is None:
                raise RuntimeError("the vLLM engine was closed")
            tok = self.llm.get_tokenizer()
            prompts = [r.prompt or "" if r.messages is None else render_messages(r.messages, tok) for r in requests]
            params = [SamplingParams(**sampling_params_kwargs(r, max_tokens_cap=self.max_new_tokens, logprobs=self.logprobs))
                      for r in requests]
            t0 = time.monotonic()
            outputs = self.llm.generate(prompts, params, lora_request=self._lora_request, use_tqdm=False)
            latency = time.monotonic() - t0
        return [completions_from_output(o, policy_version=self.policy_version, model=self.model_name, latency_s=latency)
                for o in outputs]
