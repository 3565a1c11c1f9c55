"""Template mutators (plugin kind ``prompt_mutator``): a new prompt template from an old one.

``mutate(template, rng, backend) -> TemplateEdit`` (awaitable). The result is only a
proposal: the engine validates it (:func:`qdevolve.prompts.evolution.validate_template`)
and stores a refused one as ``invalid`` with the reason.

* ``offline``: deterministic edits with no model (works with ``--mutation ast``, the
  scripted servers and the tests): add a sentence from a fixed phrase bank, remove one the
  bank added earlier, or swap two of them. Only bank sentences are ever removed or moved,
  so the format instructions of the seed template stay.
* ``model``: a meta-prompt asks the backend to rewrite the instruction part of the template,
  keeping every placeholder; the text between the reply's ``<<<TEMPLATE`` and ``TEMPLATE>>>``
  lines (else the whole reply) is the proposal (not a code fence: templates hold fences).
  One model call per mutation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.backends.base import GenerationRequest
from qdevolve.errors import RunAborted
from qdevolve.prompts.evolution import PromptTemplate, placeholders

__all__ = ["TemplateEdit", "OfflineTemplateMutator", "ModelTemplateMutator", "PHRASES", "meta_prompt", "parse_reply"]

#: Instruction sentences the offline mutator adds, removes and reorders.
PHRASES: tuple[str, ...] = (
    "Prefer a small, targeted change over a rewrite.",
    "Look at the metrics first and change the part of the program that limits the score.",
    "If the evaluation reported an error, fix that error before anything else.",
    "Try a different algorithmic idea than the one the program uses now.",
    "Keep the program correct: a faster but wrong program scores zero.",
    "Borrow a good idea from the other programs shown, if one applies.",
    "Tune numeric constants when the structure already looks right.",
    "Remove code that does not contribute to the score.",
    "Think about edge cases the evaluator may test.",
    "Make exactly one change and explain why it should raise the score.",
)


@dataclass
class TemplateEdit:
    """A proposed template (``text=None``: the mutator made none, ``reason`` says why)."""

    text: str | None
    reason: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@registry.prompt_mutator("offline")
class OfflineTemplateMutator:
    """Phrase-bank edits (module docstring); deterministic given ``rng``."""

    name = "offline"

    async def mutate(self, template: PromptTemplate, rng: np.random.Generator, backend: Any = None) -> TemplateEdit:
        lines = template.text.split("\n")
        present = [i for i, line in enumerate(lines) if line.strip() in PHRASES]
        ops = ["add"] + (["remove"] if present else []) + (["swap"] if len(present) > 1 else [])
        op = ops[int(rng.integers(len(ops)))]
        if op == "add":
            unused = [p for p in PHRASES if all(line.strip() != p for line in lines)]
            if not unused:
                op = "remove"
            else:
                phrase = unused[int(rng.integers(len(unused)))]
                lines.append(phrase)
                return TemplateEdit("\n".join(lines), metadata={"edit": "add", "phrase": phrase})
        if op == "remove":
            i = present[int(rng.integers(len(present)))]
            phrase = lines.pop(i).strip()
            return TemplateEdit("\n".join(lines), metadata={"edit": "remove", "phrase": phrase})
        a, b = (int(x) for x in rng.choice(present, size=2, replace=False))
        lines[a], lines[b] = lines[b], lines[a]
        return TemplateEdit("\n".join(lines), metadata={"edit": "swap", "lines": sorted((a, b))})


OPEN, CLOSE = "<<<TEMPLATE", "TEMPLATE>>>"
_BETWEEN = re.compile(r"^<<<TEMPLATE[ \t]*\n(.*?)\n[ \t]*TEMPLATE>>>[ \t]*$", re.DOTALL | re.MULTILINE)


def parse_reply(text: str) -> str:
    """The template in a meta-prompt reply: between the markers, else the whole reply."""
    m = _BETWEEN.search(text)
    return m.group(1) if m else text.strip()


def meta_prompt(template: PromptTemplate) -> list[dict[str, str]]:
    """The messages asking a model to rewrite ``template``'s instructions."""
    names = sorted({f for f, _c, _s in placeholders(template.text)})
    keep = ", ".join("{" + n + "}" for n in names)
    return [
        {"role": "system", "content": "You improve the instructions of prompt templates that ask a model to "
                                      "improve a program."},
        {"role": "user", "content": (
            "Rewrite the instructions of this prompt template so that a model following it is more likely to "
            f"improve the program. Keep every placeholder exactly as written, each once: {keep}. Do not add "
            "other words in braces. Keep the required answer format. Answer with the whole new template "
            f"between a line {OPEN} and a line {CLOSE}.\n\n{OPEN}\n" + template.text + f"\n{CLOSE}\n")},
    ]


@registry.prompt_mutator("model")
class ModelTemplateMutator:
    """The backend rewrites the template (module docstring).

    Args:
        temperature: Sampling temperature of the meta-prompt.
        max_tokens: Its token limit.
    """

    name = "model"

    def __init__(self, *, temperature: float = 0.7, max_tokens: int = 1024) -> None:
        self.temperature, self.max_tokens = float(temperature), int(max_tokens)

    async def mutate(self, template: PromptTemplate, rng: np.random.Generator, backend: Any = None) -> TemplateEdit:
        if backend is None:
            return TemplateEdit(None, "the model template mutator needs a backend; use prompt.template_mutator: "
                                      "{type: offline} without a model")
        req = GenerationRequest(messages=meta_prompt(template), n=1, seed=int(rng.integers(0, 2**31 - 1)),
                                temperature=self.temperature, max_tokens=self.max_tokens,
                                metadata={"operator": "template_mutation", "template_id": template.id})
        try:
            results = await backend.generate([req])
        except RunAborted:
            raise
        except Exception as exc:  # a failed meta-prompt is a refused template, not a dead run
            return TemplateEdit(None, f"backend error: {type(exc).__name__}: {str(exc)[:200]}")
        comps = list(results[0]) if results else []
        if not comps or comps[0].error or not (comps[0].text or "").strip():
            return TemplateEdit(None, "the model returned no template"
                                + (f" ({comps[0].error})" if comps and comps[0].error else ""))
        comp = comps[0]
        return TemplateEdit(parse_reply(comp.text), metadata={"usage": {"prompt_tokens": comp.prompt_tokens,
                                                      "completion_tokens": comp.completion_tokens,
                                                      "model": comp.model}})
