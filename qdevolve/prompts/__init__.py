"""Prompt building for LLM mutations: messages from a parent, its feedback and inspirations."""

from qdevolve.prompts.builder import (
    TEMPLATE_NAMES,
    build_prompt,
    load_template,
    prompt_hash,
    render_artifacts,
    truncate_middle,
)

__all__ = ["TEMPLATE_NAMES", "build_prompt", "load_template", "prompt_hash", "render_artifacts", "truncate_middle"]
