"""LoRA layout read from the model itself: which modules to adapt and their weight layout.

Targets are the leaf names of the model's projection layers: every ``torch.nn.Linear`` and
every transformers ``Conv1D`` (GPT-2's layer, which stores its weight as (in, out)) except
the output head (the module ``get_output_embeddings()`` returns). So a Llama, Qwen or
Mistral model gets ``q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj`` and a
GPT-2 gets ``c_attn, c_proj, c_fc``. ``fan_in_fan_out`` (peft's flag for transposed
weights) is true exactly when the targets are ``Conv1D``; a model mixing both layouts under
the chosen names cannot take one LoRA config and is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from qdevolve.errors import ConfigError

__all__ = ["lora_targets"]


_PEFT_PARTS = {"base_layer", "lora_A", "lora_B", "lora_dropout", "lora_embedding_A", "lora_embedding_B",
               "lora_magnitude_vector"}  # the insides of a PEFT LoRA wrapper


def _layout(module: Any) -> str | None:
    import torch

    if hasattr(module, "lora_A") and getattr(module, "base_layer", None) is not None:
        module = module.base_layer  # a layer PEFT already wrapped: the layout of the layer it wraps

    if isinstance(module, torch.nn.Linear):
        return "linear"
    if type(module).__name__ == "Conv1D" and type(module).__module__.startswith("transformers"):
        return "conv1d"
    return None


def lora_targets(model: Any, names: Sequence[str] | None = None) -> tuple[list[str], bool]:
    """``(target module names, fan_in_fan_out)`` for ``model``.

    Args:
        model: A transformers causal LM.
        names: Target names the user chose (``None``: every projection but the output head).

    Raises:
        ConfigError: no module matches, or the matches mix Linear and Conv1D layouts.
    """
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    found: dict[str, set[str]] = {}
    for full, module in model.named_modules():
        kind = _layout(module)
        leaf = full.rsplit(".", 1)[-1]
        if kind is None or module is head or not full or _PEFT_PARTS & set(full.split(".")):
            continue
        if names is not None and leaf not in names:
            continue
        found.setdefault(leaf, set()).add(kind)
    if not found:
        wanted = "any projection layer" if names is None else f"any of {', '.join(names)}"
        raise ConfigError(f"LoRA: {type(model).__name__} has no Linear or Conv1D module named {wanted}; set "
                          f"lora_target_modules to names from model.named_modules()")
    kinds = set().union(*found.values())
    if len(kinds) > 1:
        conv = sorted(n for n, k in found.items() if "conv1d" in k)
        raise ConfigError(f"LoRA: {type(model).__name__} mixes Conv1D ({', '.join(conv)}) and Linear targets; "
                          f"set lora_target_modules to names of one kind")
    return sorted(found), kinds == {"conv1d"}
