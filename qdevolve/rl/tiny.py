"""A tiny local base policy per task: character tokenizer + 2-layer GPT-2, SFT-pre-trained.

No downloads: the tokenizer is a character vocabulary built with ``tokenizers`` (a BPE
model with no merges, so every character is one token; a ``Fuse`` decoder; a post-processor
that prepends ``[BOS]``) wrapped as a ``transformers`` fast tokenizer, and the model is a
``GPT2Config`` (2 layers, ``n_embd`` 64, 4 heads, ~0.1 M parameters) initialised from
config. It is pre-trained by supervised fine-tuning on the task's *broad*
``sft_examples`` (valid answers drawn uniformly plus a share of random wrong ones), with the loss on answer tokens and ``[EOS]`` only. The
result is a normal Hugging Face model directory (``save_pretrained``), loadable with
``AutoModelForCausalLM.from_pretrained(dir)`` and ``AutoTokenizer.from_pretrained(dir)``, so
a ``transformers`` generation backend can serve it and :class:`~qdevolve.rl.trainer.PolicyTrainer`
can train it.

A build shows a progress bar on a terminal and one line elsewhere (:mod:`qdevolve.progress`).
Directories are cached under ``~/.cache/qdevolve/tiny/<task>-<hash>`` (or ``$QDEVOLVE_CACHE_DIR``) (the hash covers the
task, seed and every build setting); a build goes to a temporary directory first and is
renamed into place, so a killed build never leaves a half-written cache entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import queue
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qdevolve.rl.tasks import get_task

__all__ = ["TINY_VERSION", "SPECIAL_TOKENS", "build_tokenizer", "build_model", "tiny_policy_dir",
           "load_tiny_policy", "sft_pretrain", "cache_root", "CACHE_ENV"]

TINY_VERSION = 2  # v2: one torch thread, data on a second thread; a task may set its own tiny_defaults
SPECIAL_TOKENS: tuple[str, ...] = ("[PAD]", "[BOS]", "[EOS]", "[UNK]")
_DEFAULTS: dict[str, Any] = {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 96,
                             "sft_steps": 800, "batch_size": 64, "lr": 3e-3}


def build_tokenizer(alphabet: str) -> Any:
    """A character-level ``PreTrainedTokenizerFast`` over ``alphabet`` (plus special tokens)."""
    from tokenizers import Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    chars = sorted(set(alphabet))
    vocab = {t: i for i, t in enumerate([*SPECIAL_TOKENS, *chars])}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(single="[BOS] $A", special_tokens=[("[BOS]", vocab["[BOS]"])])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="[BOS]", eos_token="[EOS]",
                                   pad_token="[PAD]", unk_token="[UNK]")


def build_model(tokenizer: Any, *, n_embd: int = 64, n_layer: int = 2, n_head: int = 4,
                n_positions: int = 96, seed: int = 0) -> Any:
    """A randomly initialised ``GPT2LMHeadModel`` sized for ``tokenizer``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=n_positions, n_embd=n_embd,
                        n_layer=n_layer, n_head=n_head, n_inner=4 * n_embd, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=tokenizer.bos_token_id,
                        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return GPT2LMHeadModel(config)


def _encode_examples(tokenizer: Any, examples: list[tuple[str, str]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``[BOS] prompt answer [EOS]`` ids, attention mask, and a loss mask."""
    rows, loss_rows = [], []
    eos = tokenizer.eos_token_id
    prompts = tokenizer([p for p, _ in examples])["input_ids"]
    answers = tokenizer([a for _, a in examples], add_special_tokens=False)["input_ids"]
    for p, a in zip(prompts, answers, strict=True):
        a = [*a, eos]
        rows.append(p + a)
        loss_rows.append([0] * len(p) + [1] * len(a))
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    att = torch.zeros((len(rows), width), dtype=torch.long)
    lm = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, (r, m) in enumerate(zip(rows, loss_rows, strict=True)):
        ids[i, : len(r)] = torch.tensor(r)
        att[i, : len(r)] = 1
        lm[i, : len(m)] = torch.tensor(m, dtype=torch.float32)
    return ids, att, lm


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """Run with ``n`` intra-op torch threads, then restore the previous count.

    A 0.1 M-parameter model's matrices are too small to split: on a shared or busy 2-core
    machine two threads made each step six times slower than one (1.5 s against 0.25 s
    per batch of 64, measured for this module), so the build trains on one thread and
    draws its data on another (:class:`_Batches`)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class _Batches:
    """Encoded pre-training batches drawn by a background thread, in order, from one rng.

    The task's ``sft_examples`` is Python (about 1 ms an example for ``expr_edit``); drawn on
    a second thread it overlaps the model's step, which releases the GIL inside torch. One
    producer and one rng: the batches are the same as a loop drawing them in turn."""

    def __init__(self, tokenizer: Any, task: Any, rng: np.random.Generator, *, steps: int,
                 batch_size: int, ahead: int = 4) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=ahead)
        self._stop = threading.Event()

        self.cpu_seconds = 0.0  # CPU time the producer thread spent drawing and encoding

        def produce() -> None:
            t0 = time.thread_time()
            try:
                for _ in range(steps):
                    batch = _encode_examples(tokenizer, task.sft_examples(rng, batch_size))
                    while not self._stop.is_set():
                        try:
                            self._queue.put(batch, timeout=0.1)
                            break
                        except queue.Full:
                            continue
                    if self._stop.is_set():
                        return
            except BaseException as exc:  # surfaced in the training thread by next()
                self._queue.put(exc)
            finally:
                self.cpu_seconds = time.thread_time() - t0

        self._thread = threading.Thread(target=produce, name="qdevolve-tiny-data", daemon=True)
        self._thread.start()

    def next(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        item = self._queue.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def sft_pretrain(model: Any, tokenizer: Any, task: Any, *, steps: int, batch_size: int = 64,
                 lr: float = 3e-3, seed: int = 0,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, float]:
    """Supervised pre-training on ``task.sft_examples``; returns the final loss and time.

    AdamW (``betas`` 0.9/0.98, weight decay 0.01), a linear warm-up over the first 5 % of
    the steps then a cosine decay to 2 % of ``lr``; the loss is the mean cross-entropy on
    answer tokens and ``[EOS]``. One torch thread trains while another draws the data.
    ``progress(done, total)`` is called after every step.
    """
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    model.train()
    start, cpu0, loss_ema = time.perf_counter(), time.thread_time(), float("nan")
    warm = max(1, steps // 20)
    batches = _Batches(tokenizer, task, rng, steps=steps, batch_size=batch_size)
    try:
        with _torch_threads(1):
            for step in range(steps):
                scale = min(1.0, (step + 1) / warm) * 0.5 * (1 + math.cos(math.pi * step / max(steps, 1)))
                for group in opt.param_groups:
                    group["lr"] = lr * max(scale, 0.02)
                ids, att, lm = batches.next()
                logits = model(input_ids=ids, attention_mask=att).logits[:, :-1]
                nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                        ids[:, 1:].reshape(-1),
                                                        reduction="none").view(ids.shape[0], -1)
                loss = (nll * lm[:, 1:]).sum() / lm[:, 1:].sum()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                value = loss.item()
                loss_ema = value if math.isnan(loss_ema) else 0.95 * loss_ema + 0.05 * value
                if progress is not None:
                    progress(step + 1, steps)
    finally:
        batches.close()
    model.eval()
    # the two threads' CPU seconds: on two idle cores the build takes about the larger one
    return {"sft_loss": loss_ema, "sft_seconds": time.perf_counter() - start, "sft_steps": steps,
            "sft_train_cpu_seconds": time.thread_time() - cpu0, "sft_data_cpu_seconds": batches.cpu_seconds}


def _settings(task_name: str, seed: int, overrides: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(overrides) - set(_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown tiny-policy setting(s) {', '.join(unknown)}; known: {', '.join(_DEFAULTS)}")
    from qdevolve.rl.tasks import TASKS

    own = getattr(TASKS.get(task_name), "tiny_defaults", {})  # a task's own recipe (expr_edit: 500 steps)
    return {"task": task_name, "seed": seed, "version": TINY_VERSION, **_DEFAULTS, **own, **overrides}


CACHE_ENV = "QDEVOLVE_CACHE_DIR"


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """Where tiny base policies are cached: ``cache_dir``, else ``$QDEVOLVE_CACHE_DIR``, else
    ``~/.cache/qdevolve/tiny`` (``qdevolve run --cache-dir`` and ``train --cache-dir`` set it)."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "qdevolve" / "tiny"


def tiny_policy_dir(task: str, cache_dir: str | Path | None = None, *, seed: int = 0,
                    **settings: Any) -> Path:
    """The cached model directory of ``task``'s tiny base policy, built on first use.

    Args:
        task: Task name (``multi_answer``, ``expr_dsl``, ``bandit``).
        cache_dir: Parent directory of the cache (default: :func:`cache_root`).
        seed: The base's own seed (initialisation and SFT data): ``train.base_seed`` /
            ``--base-seed``, never a run's ``--seed``, so a new run seed reuses the cached base.
        **settings: Overrides of ``n_embd``, ``n_layer``, ``n_head``, ``n_positions``,
            ``sft_steps``, ``batch_size``, ``lr`` (each changes the cache key).

    Returns:
        A directory holding ``config.json``, the weights, the tokenizer files and
        ``qdevolve_tiny.json`` (build settings, final SFT loss, build time).
    """
    from qdevolve.progress import phase

    cfg = _settings(task, seed, settings)
    digest = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:12]
    root = cache_root(cache_dir)
    target = root / f"{task}-{digest}"
    if (target / "qdevolve_tiny.json").is_file():
        return target
    task_obj = get_task(task)
    tokenizer = build_tokenizer(task_obj.alphabet)
    model = build_model(tokenizer, n_embd=cfg["n_embd"], n_layer=cfg["n_layer"], n_head=cfg["n_head"],
                        n_positions=cfg["n_positions"], seed=seed)
    label = f"pre-training the tiny base policy for {task} (seed {seed}, {cfg['sft_steps']} steps; once, cached)"
    with phase(label, total=cfg["sft_steps"]) as advance:
        info = sft_pretrain(model, tokenizer, task_obj, steps=cfg["sft_steps"], batch_size=cfg["batch_size"],
                            lr=cfg["lr"], seed=seed, progress=lambda done, _total: advance(done))
    tmp = root / f".{task}-{digest}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "qdevolve_tiny.json").write_text(json.dumps({**cfg, **info}, indent=1))
    try:
        os.replace(tmp, target)
    except OSError:  # another process finished first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / "qdevolve_tiny.json").is_file():
            raise
    return target


def load_tiny_policy(task: str, cache_dir: str | Path | None = None, *, seed: int = 0,
                     **settings: Any) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of :func:`tiny_policy_dir` (model in eval mode, fp32, CPU)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_policy_dir(task, cache_dir, seed=seed, **settings)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    return model, tokenizer
