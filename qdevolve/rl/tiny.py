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

Directories are cached under ``~/.cache/qdevolve/tiny/<task>-<hash>`` (the hash covers the
task, seed and every build setting); a build goes to a temporary directory first and is
renamed into place, so a killed build never leaves a half-written cache entry.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qdevolve.rl.tasks import get_task

__all__ = ["TINY_VERSION", "SPECIAL_TOKENS", "build_tokenizer", "build_model", "tiny_policy_dir",
           "load_tiny_policy", "sft_pretrain"]

TINY_VERSION = 1
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


def sft_pretrain(model: Any, tokenizer: Any, task: Any, *, steps: int, batch_size: int = 64,
                 lr: float = 3e-3, seed: int = 0) -> dict[str, float]:
    """Supervised pre-training on ``task.sft_examples``; returns the final loss and time."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    model.train()
    start, loss_ema = time.perf_counter(), float("nan")
    warm = max(1, steps // 20)
    for step in range(steps):
        scale = min(1.0, (step + 1) / warm) * 0.5 * (1 + math.cos(math.pi * step / max(steps, 1)))
        for group in opt.param_groups:
            group["lr"] = lr * max(scale, 0.02)
        ids, att, lm = _encode_examples(tokenizer, task.sft_examples(rng, batch_size))
        logits = model(input_ids=ids, attention_mask=att).logits[:, :-1]
        nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                                                reduction="none").view(ids.shape[0], -1)
        loss = (nll * lm[:, 1:]).sum() / lm[:, 1:].sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_ema = loss.item() if math.isnan(loss_ema) else 0.95 * loss_ema + 0.05 * loss.item()
    model.eval()
    return {"sft_loss": loss_ema, "sft_seconds": time.perf_counter() - start, "sft_steps": steps}


def _settings(task_name: str, seed: int, overrides: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(overrides) - set(_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown tiny-policy setting(s) {', '.join(unknown)}; known: {', '.join(_DEFAULTS)}")
    return {"task": task_name, "seed": seed, "version": TINY_VERSION, **_DEFAULTS, **overrides}


def tiny_policy_dir(task: str, cache_dir: str | Path | None = None, *, seed: int = 0,
                    **settings: Any) -> Path:
    """The cached model directory of ``task``'s tiny base policy, built on first use.

    Args:
        task: Task name (``multi_answer``, ``expr_dsl``, ``bandit``).
        cache_dir: Parent directory of the cache (default ``~/.cache/qdevolve/tiny``).
        seed: Seed of initialisation and SFT data.
        **settings: Overrides of ``n_embd``, ``n_layer``, ``n_head``, ``n_positions``,
            ``sft_steps``, ``batch_size``, ``lr`` (each changes the cache key).

    Returns:
        A directory holding ``config.json``, the weights, the tokenizer files and
        ``qdevolve_tiny.json`` (build settings, final SFT loss, build time).
    """
    cfg = _settings(task, seed, settings)
    digest = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:12]
    root = Path(cache_dir).expanduser() if cache_dir is not None else Path.home() / ".cache" / "qdevolve" / "tiny"
    target = root / f"{task}-{digest}"
    if (target / "qdevolve_tiny.json").is_file():
        return target
    task_obj = get_task(task)
    tokenizer = build_tokenizer(task_obj.alphabet)
    model = build_model(tokenizer, n_embd=cfg["n_embd"], n_layer=cfg["n_layer"], n_head=cfg["n_head"],
                        n_positions=cfg["n_positions"], seed=seed)
    info = sft_pretrain(model, tokenizer, task_obj, steps=cfg["sft_steps"], batch_size=cfg["batch_size"],
                        lr=cfg["lr"], seed=seed)
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
