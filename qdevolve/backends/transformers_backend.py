"""Backend ``transformers``: a Hugging Face causal LM sampled in-process (CPU or GPU).

Because the weights live in this process, a trainer that updates the same model object is
sampled from by the very next call. Each completion carries its token ids and the
*behaviour policy's* log-probs of the sampled tokens:

    log pi(y_t | x, y_<t) = log_softmax(P(z_t / T))[y_t]

where ``z_t`` are the model's logits, ``T`` the temperature and ``P`` the top-p filter
(logits outside the nucleus set to -inf), i.e. exactly the distribution the token was drawn
from (Hugging Face's processed generation ``scores``). With ``temperature == 0`` decoding is
greedy and the log-probs are those of the unscaled distribution. These are the "old"
log-probs the RL objectives importance-weight against.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from qdevolve import registry
from qdevolve.backends.adapters import (
    BaseIdentity,
    attach_adapter,
    base_identity,
    check_base,
    identity_of_model,
    read_meta,
    version_kind,
)
from qdevolve.backends.base import Completion, GenerationRequest
from qdevolve.backends.coalesce import RequestCoalescer
from qdevolve.backends.device import model_device, place
from qdevolve.errors import ConfigError

__all__ = ["TransformersBackend", "AdapterSlots", "quiet_transformers", "render_messages"]


def render_messages(messages: list[dict[str, str]], tokenizer: Any) -> str:
    """Chat messages as prompt text: the tokenizer's chat template, else ``role: content`` lines."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\nassistant: "


def _cut_at_stop(ids: list[int], text_of: Any, stops: list[str]) -> tuple[int, bool]:
    """Number of tokens to keep so the text ends right after the first stop string."""
    for k in range(1, len(ids) + 1):
        text = text_of(ids[:k])
        if any(s and s in text for s in stops):
            return k, True
    return len(ids), False


VERBOSE_ENV = "QDEVOLVE_TRANSFORMERS_VERBOSE"


def quiet_transformers() -> None:
    """Keep transformers' and huggingface_hub's log lines, advisory warnings (the
    ``attention_mask`` notice) and progress bars ("Loading weights") out of the user's terminal.

    Set ``QDEVOLVE_TRANSFORMERS_VERBOSE=1`` to keep them (debugging a model load).
    """
    import os
    import warnings

    if os.environ.get(VERBOSE_ENV, "").strip() not in ("", "0"):
        return
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        from huggingface_hub.utils import disable_progress_bars
    except ImportError:
        pass
    else:
        disable_progress_bars()
    warnings.filterwarnings("ignore", module=r"transformers(\..*)?$")


class AdapterSlots:
    """The adapter versions loaded over a backend's base, switched in place (PEFT
    ``add_adapter`` + ``set_adapter``: LoRA layers injected around the base's own weight
    tensors, which are never reloaded), at most ``limit`` at once, least recently used dropped.

    Each adapter is checked against the base's identity before it is applied
    (:func:`~qdevolve.backends.adapters.check_base`): the identity given as ``base``, else the
    directory the base was loaded from (``source``), else the loaded model's own directory when
    its weights equal that directory's; computed once, before the first adapter is injected.
    """

    def __init__(self, backend: Any, limit: int, *, base: Any, source: str | None) -> None:
        self.backend, self.limit = backend, limit
        self.loaded: OrderedDict[str, str] = OrderedDict()  # adapter name -> directory, oldest first
        self._given, self._source = base, source
        self._identity: BaseIdentity | None = None
        self._known = False

    def identity(self) -> BaseIdentity | None:
        if not self._known:
            if isinstance(self._given, BaseIdentity):
                self._identity = self._given
            elif self._given is not None:
                self._identity = base_identity(self._given)
            elif self._source is not None:
                self._identity = base_identity(self._source)
            else:
                self._identity = identity_of_model(self.backend.model)
            self._known = True
        return self._identity

    def switch(self, path: Path, version: int) -> Any:
        """The backend's model with the adapter of ``path`` active as ``v<version>``."""
        name, where = f"v{version}", str(path.resolve())
        model = self.backend.model
        if "default" in getattr(model, "peft_config", {}):
            raise ConfigError(f"policy version {version}: this backend samples a trainer's own LoRA model, whose "
                              "new weights it sees in place (load_policy(version, None)); give adapter "
                              "directories to a backend with its own copy of the base")
        if self.loaded.get(name) == where:
            model.set_adapter(name, inference_mode=True)
        else:
            check_base(read_meta(path), self.identity(), directory=path, version=version)
            if name in self.loaded:  # the same version number from another directory: replace it
                model.delete_adapter(name)
                del self.loaded[name]
            model = attach_adapter(model, path, name=name)
        self.loaded[name] = where
        self.loaded.move_to_end(name)
        while len(self.loaded) > self.limit:
            oldest = next(iter(self.loaded))
            model.delete_adapter(oldest)
            del self.loaded[oldest]
        return model


@registry.backend("transformers")
class TransformersBackend:
    """In-process sampling from a causal LM.

    Args:
        model: A known model's name (``qdevolve models``; prepared on first use), a local
            Hugging Face directory, or a loaded ``PreTrainedModel``. Never a hub download.
        tokenizer: A tokenizer (default: loaded from ``model`` when it is a path).
        device: ``cpu``, ``cuda``, ``cuda:1``, ``auto`` (default ``None``: where a loaded model
            already is, so a backend sharing a trainer's model samples where it trains; CPU for a
            model loaded from a path). Chosen by :func:`qdevolve.backends.device.place`, the
            trainer's own path.
        dtype: Torch dtype name (``float32``, ``bfloat16``...) for models loaded from a path.
        max_new_tokens: Cap on generated tokens (requests may ask for fewer).
        batch_size: Sequences generated together.
        name: Model name stored on completions.
        threads: Torch intra-op threads for this process (``None``: torch's default). On a
            machine whose cores other processes also use, 1 thread can be several times
            faster than 2 (OpenMP workers spin waiting for each other; see BENCHMARKS.md).
        base: The base's identity for adapter versions (a model directory or a
            :class:`~qdevolve.backends.adapters.BaseIdentity`; default: the directory the
            model was loaded from, or a loaded model's own directory when its weights equal it).
        max_adapters: Adapter versions kept loaded at once (least recently used dropped first).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        device: str | None = None,
        dtype: str | None = None,
        max_new_tokens: int = 1024,
        batch_size: int = 8,
        name: str | None = None,
        threads: int | None = None,
        base: Any = None,
        max_adapters: int = 4,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        quiet_transformers()
        if batch_size < 1 or max_new_tokens < 1:
            raise ValueError(f"batch_size and max_new_tokens must be >= 1, got {batch_size}, {max_new_tokens}")
        if int(max_adapters) < 1:
            raise ValueError(f"max_adapters must be >= 1, got {max_adapters}")
        self.dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        if threads is not None:
            if int(threads) < 1:
                raise ValueError(f"threads must be >= 1, got {threads}")
            torch.set_num_threads(int(threads))
        if isinstance(model, (str, Path)):
            from qdevolve.backends.models import offline_hub, resolve_model

            self.name = name or str(model)
            path = str(resolve_model(model))
            source = path
            with offline_hub():
                tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
                model = AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype)
        else:
            source = None
            self.name = name or getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
        if tokenizer is None:
            raise ValueError("pass tokenizer= when model is a loaded model object")
        place(model, device)  # the trainer's path too: a shared model stays where it trains
        self.model = model
        self.adapters = AdapterSlots(self, int(max_adapters), base=base, source=source)
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.max_new_tokens, self.batch_size = int(max_new_tokens), int(batch_size)
        self.policy_version: int | None = None
        self._lock = threading.Lock()
        self._coalesce = RequestCoalescer(self.generate_sync)

    @property
    def device(self) -> Any:
        """Where the model is now (:func:`~qdevolve.backends.device.model_device`)."""
        return model_device(self.model)

    def __repr__(self) -> str:
        return f"TransformersBackend(model={self.name!r}, device={str(self.device)!r}, policy_version={self.policy_version})"

    # -- policy updates ---------------------------------------------------------------
    def load_policy(self, version: int, path: str | None) -> None:
        """Switch to policy ``version``: an adapter directory (switched in place over the loaded
        base: :class:`AdapterSlots`) or a full model directory (loaded in its place).

        ``path=None`` means the in-process model was already updated (by the trainer); only
        the version changes.
        """
        if path is not None:
            p = Path(path)
            if not p.is_dir():
                raise FileNotFoundError(f"policy version {version}: {p} is not a model or adapter directory")
            with self._lock:
                if version_kind(p) == "adapter":
                    self.model = self.adapters.switch(p, version)
                else:
                    from transformers import AutoModelForCausalLM

                    from qdevolve.backends.models import offline_hub

                    with offline_hub():
                        model = AutoModelForCausalLM.from_pretrained(str(p), dtype=self.dtype, use_safetensors=True)
                    place(model, self.device)
                    self.model = model
                    self.adapters = AdapterSlots(self, self.adapters.limit, base=None, source=str(p))
        self.policy_version = version

    def close(self) -> None:
        """Nothing to release beyond the model object (kept for the backend protocol)."""

    # -- generation -------------------------------------------------------------------
    async def generate(self, requests: list[GenerationRequest]) -> list[list[Completion]]:
        """``n`` samples per request, batched; runs in a worker thread (one batch at a time).

        Concurrent calls (one per plan in flight) are joined into one batched call
        (:class:`~qdevolve.backends.coalesce.RequestCoalescer`).
        """
        return await self._coalesce(requests)

    def generate_sync(self, requests: list[GenerationRequest]) -> list[list[Completion]]:
        """Blocking :meth:`generate`."""
        out: list[list[Completion]] = [[] for _ in requests]
        # requests batch together when their sampling settings agree; the seed is not one of them:
        # row j of a request with seed s draws from its own generator seeded s + j, so requests
        # with different seeds (every LLM mutator's) share a batch and each stays reproducible
        rows: dict[tuple, list[tuple[int, str, int | None]]] = {}
        for i, r in enumerate(requests):
            text = r.prompt if r.messages is None else render_messages(r.messages, self.tokenizer)
            key = (float(r.temperature), float(r.top_p), min(int(r.max_tokens), self.max_new_tokens),
                   tuple(r.stop or ()))
            rows.setdefault(key, []).extend((i, text or "", None if r.seed is None else int(r.seed) + j)
                                            for j in range(max(1, r.n)))
        with self._lock:
            for key, items in rows.items():
                for start in range(0, len(items), self.batch_size):
                    chunk = items[start:start + self.batch_size]
                    comps = self._sample([t for _, t, _ in chunk], key, [s for _, _, s in chunk])
                    for (i, _, _), comp in zip(chunk, comps, strict=True):
                        out[i].append(comp)
        return out

    def _sample(self, texts: list[str], key: tuple, seeds: list[int | None]) -> list[Completion]:
        """Sample one continuation per text; equal texts (a group's rows) share one prefill."""
        import torch

        from qdevolve.backends._sampler import sample_rows

        temperature, top_p, max_new, stops = key
        t0 = time.monotonic()
        distinct: dict[str, int] = {}
        rows = [distinct.setdefault(t, len(distinct)) for t in texts]
        prompts = [self._prompt_ids(t) for t in distinct]
        eos = self.tokenizer.eos_token_id
        generator = None
        if temperature > 0 and any(s is not None for s in seeds):
            generator = [None if s is None else torch.Generator(device=self.device).manual_seed(s) for s in seeds]
        decode = lambda x: self.tokenizer.decode(x, skip_special_tokens=True)  # noqa: E731
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                sampled = sample_rows(self.model, prompts, rows, temperature=temperature, top_p=top_p,
                                      max_new=max_new, eos=eos, pad=self.tokenizer.pad_token_id, stops=list(stops),
                                      decode=decode, generator=generator)
        finally:
            if was_training:
                self.model.train()
        latency = time.monotonic() - t0
        comps = []
        for row, s in zip(rows, sampled, strict=True):
            ids, logprobs, finish = s.ids, s.logprobs, s.finish
            if stops and finish == "stop" and not (eos is not None and ids and ids[-1] == eos):
                k, _ = _cut_at_stop(ids, decode, list(stops))
                ids, logprobs = ids[:k], logprobs[:k]
            prompt_ids = prompts[row]
            comps.append(
                Completion(
                    text=decode(ids),
                    token_ids=ids,
                    logprobs=logprobs,
                    prompt_token_ids=list(prompt_ids),
                    finish_reason=finish,
                    prompt_tokens=len(prompt_ids),
                    completion_tokens=len(ids),
                    policy_version=self.policy_version,
                    model=self.name,
                    latency_s=latency,
                )
            )
        return comps

    def _prompt_ids(self, text: str) -> list[int]:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if not ids:  # an empty prompt: start from BOS (else EOS), as generate() would
            start = self.tokenizer.bos_token_id if self.tokenizer.bos_token_id is not None else self.tokenizer.eos_token_id
            ids = [start]
        return list(ids)
