"""GGUF file -> plain Hugging Face directory (dequantised float32 weights and a tokenizer).

transformers reads a GGUF with ``from_pretrained(dir, gguf_file=...)`` and dequantises its
tensors, but refuses ``save_pretrained`` on the result (it still counts as quantised); so the
weights are copied into a model built from the same config, which saves normally.

The pre-tokenizer: a GGUF names it by a tag (``tokenizer.ggml.pre``) that selects a split
regex in llama.cpp. transformers' converter ignores the tag and always uses GPT-2's
byte-level split. For ``smollm`` llama.cpp splits every digit apart before GPT-2's regex
(the ``\\p{N}`` rule, as the original ``tokenizer.json`` does with a ``Digits`` step), so the
converted tokenizer gets the same ``Sequence([Digits(individual_digits=True), ByteLevel])``.
A tag this module does not know is an error rather than a silently different tokenizer.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["convert_gguf", "gguf_pre_tokenizer"]

#: Tags whose llama.cpp split is GPT-2's regex after splitting digits one by one.
_DIGITS_THEN_GPT2 = frozenset({"smollm"})
#: Tags whose split is GPT-2's regex alone (transformers' default conversion).
_GPT2 = frozenset({"gpt2", "default"})


def gguf_pre_tokenizer(path: Path) -> str:
    """The file's ``tokenizer.ggml.pre`` tag (``default`` when absent)."""
    from gguf import GGUFReader

    field = GGUFReader(str(path)).fields.get("tokenizer.ggml.pre")
    return "default" if field is None else str(field.contents())


def _fix_pre_tokenizer(tokenizer: Any, tag: str, path: Path) -> None:
    from tokenizers import pre_tokenizers

    if tag in _GPT2:
        return
    if tag not in _DIGITS_THEN_GPT2:
        raise ValueError(f"{path}: GGUF pre-tokenizer {tag!r} is not one qdevolve can reproduce "
                         f"(known: {', '.join(sorted(_GPT2 | _DIGITS_THEN_GPT2))})")
    tokenizer.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])


def convert_gguf(path: Path, target: Path, *, pre_tokenizer: str, progress: Callable[[str], None]) -> None:
    """Write ``path``'s model and tokenizer to ``target`` as a plain Hugging Face directory.

    ``pre_tokenizer`` is the tag the caller pinned; a file carrying another tag is refused.
    The directory is written as ``<target>.partial`` and renamed, replacing ``target``.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from qdevolve.backends.models import offline_hub
    from qdevolve.backends.transformers_backend import quiet_transformers

    quiet_transformers()
    tag = gguf_pre_tokenizer(path)
    if tag != pre_tokenizer:
        raise ValueError(f"{path}: pre-tokenizer tag {tag!r}, expected {pre_tokenizer!r}")
    progress("convert")
    os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' own per-tensor bar; the caller shows phases
    with offline_hub():
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        quantised = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    _fix_pre_tokenizer(tokenizer, tag, path)
    plain = AutoModelForCausalLM.from_config(quantised.config, dtype=torch.float32)
    result = plain.load_state_dict(quantised.state_dict(), strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(f"{path}: converted weights do not match the config (missing {result.missing_keys[:5]}, "
                         f"unexpected {result.unexpected_keys[:5]})")
    del quantised
    progress("save")
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    plain.config.name_or_path = target.name
    plain.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    if target.exists():
        shutil.rmtree(target)
    partial.rename(target)
