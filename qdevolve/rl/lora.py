"""The trainer's LoRA: adapters fitted to the model's architecture (Hu et al. 2021, LoRA).

Each adapted projection ``W`` (a Linear or GPT-2 Conv1D layer) computes
``W x + (alpha / r) B A x`` with ``A`` (r x in) and ``B`` (out x r) trained and ``W`` frozen;
``B`` starts at zero, so version 0 of a LoRA run is exactly its base. Which layers and
their weight layout come from the model (:func:`lora_targets`, shared with the backends that
load the adapters: :mod:`qdevolve.backends.lora_layout`); rank, alpha and dropout from
:class:`~qdevolve.rl.config.TrainerConfig`. A policy version of a LoRA run is the adapter
alone (:mod:`qdevolve.backends.adapters`).
"""

from __future__ import annotations

from typing import Any

from qdevolve.backends.lora_layout import lora_targets

__all__ = ["lora_targets", "wrap_lora"]


def wrap_lora(model: Any, config: Any) -> Any:
    """``model`` wrapped with one trainable LoRA adapter (``default``) on :func:`lora_targets`.

    Args:
        model: A transformers causal LM (a ``PeftModel`` is returned unchanged: a resumed LoRA
            run keeps training its adapter).
        config: A :class:`~qdevolve.rl.config.TrainerConfig` (``lora_r``, ``lora_alpha``,
            ``lora_dropout``, ``lora_target_modules``).
    """
    from peft import LoraConfig, PeftModel, get_peft_model

    if isinstance(model, PeftModel):
        return model
    targets, transposed = lora_targets(model, config.lora_target_modules)
    return get_peft_model(model, LoraConfig(
        r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
        target_modules=targets, fan_in_fan_out=transposed, task_type="CAUSAL_LM"))
