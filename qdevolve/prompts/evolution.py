"""Prompt templates as a second evolving population: fitness, selection, validation.

A :class:`PromptTemplate` is the user-message template of one edit format (``diff_user``,
``full_rewrite_user``, ``crossover_user``). Each child a model makes records the id of the
template that asked for it; the template is credited with the child's *improvement reward*

.. math::

    r = 0 \\text{ (the child failed: invalid reply, error, timeout...)}, \\qquad
    r = \\tfrac12\\bigl(1 + \\operatorname{clip}(\\tfrac{s_c - s_p}{\\max(|s_p|, 10^{-6})}, -1, 1)\\bigr)
    \\text{ otherwise,}

where :math:`s_c` is the child's score and :math:`s_p` its (first) parent's: ``0.5`` is "as
good as the parent", ``1`` is "doubled it or better", every failure is ``0``. A template's
fitness is the posterior mean of its rewards under one pseudo-observation of ``0.5``
(a Beta(1, 1)-style neutral prior, so a template with few children is not judged by one):

.. math::

    F(t) = \\frac{\\sum_i r_i + 0.5}{n_t + 1}.

Selection among the active templates of a name is **UCB1** (Auer, Cesa-Bianchi & Fischer,
"Finite-time analysis of the multiarmed bandit problem", Machine Learning 47, 2002) on that
posterior mean, with rewards in [0, 1] as UCB1 requires:

.. math::

    \\operatorname{UCB}(t) = F(t) + c \\sqrt{\\frac{2 \\ln (N + 1)}{n_t + 1}},

:math:`N` the children of all templates of that name, :math:`c` the ``explore`` setting
(default 1). An untried template has the largest bonus, so each new template is tried soon.

OpenEvolve's prompt meta-evolution (its PR #393) scores a template
``0.3·success_rate + 0.4·improvement_rate + 0.3·min(1, mean Δfitness + 0.5)``, holds a neutral
0.5 below 5 uses and adds an exploration bonus ``0.3·max(0, 1 − uses/20)`` that vanishes after
20 uses whatever the other templates did. Here the success and improvement terms are one
reward (a failure is 0, no change 0.5, an improvement above 0.5), the improvement is relative
to the parent (so the score's scale does not matter), the prior shrinks smoothly instead of
switching at 5 uses, and the bonus is UCB1's, which shrinks with a template's share of the
children and never stops exploring a template that could still be the best.

Templates are text a model wrote, so :func:`validate_template` is default-deny: a bounded
size, printable text, every placeholder of the seed template kept, no other placeholder, and
each placeholder a bare name (no ``{x.attr}``, ``{x[0]}``, conversions or format specs, which
``str.format`` would evaluate). A template is only ever formatted into a user message.
"""

from __future__ import annotations

import math
import string
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from qdevolve.types import PromptTemplate

__all__ = ["PromptTemplate", "TemplatePopulation", "TemplateStats", "improvement_reward", "validate_template",
           "placeholders", "MAX_TEMPLATE_CHARS", "ALLOWED_PLACEHOLDERS"]

MAX_TEMPLATE_CHARS = 8000
#: Placeholders :func:`qdevolve.prompts.build_prompt` fills; a template may use no other.
ALLOWED_PLACEHOLDERS = frozenset({"language", "language_name", "current_program", "metrics", "fitness_score",
                                  "artifacts", "evolution_history", "top_programs", "second_program",
                                  "second_metrics", "block", "block_label"})


@dataclass
class TemplateStats:
    """Children credited to one template and the sum of their rewards."""

    n: int = 0
    total: float = 0.0

    @property
    def fitness(self) -> float:
        """:math:`F(t)` of the module docstring."""
        return (self.total + 0.5) / (self.n + 1)


def improvement_reward(child_score: float | None, parent_score: float | None, ok: bool) -> float:
    """The reward :math:`r` of the module docstring (a failed child, or no score, gives 0)."""
    if not ok or child_score is None or not math.isfinite(child_score):
        return 0.0
    if parent_score is None or not math.isfinite(parent_score):
        return 0.5
    rel = (child_score - parent_score) / max(abs(parent_score), 1e-6)
    return 0.5 * (1.0 + max(-1.0, min(1.0, rel)))


def placeholders(text: str) -> list[tuple[str, str | None, str | None]]:
    """``(field, conversion, spec)`` of every replacement field of ``text``.

    Raises:
        ValueError: unbalanced braces.
    """
    return [(f, conv, spec) for _lit, f, spec, conv in string.Formatter().parse(text) if f is not None]


def validate_template(text: Any, required: Iterable[str], *, max_chars: int = MAX_TEMPLATE_CHARS) -> str | None:
    """Why ``text`` may not be a template (``None``: it may). See the module docstring."""
    if not isinstance(text, str):
        return f"not text ({type(text).__name__})"
    if not text.strip():
        return "empty template"
    if len(text) > max_chars:
        return f"{len(text)} characters, over max_template_chars={max_chars}"
    bad = next((ch for ch in text if (ord(ch) < 32 and ch not in "\n\t") or 0xD800 <= ord(ch) < 0xE000
                or ord(ch) in (0x7F, 0x2028, 0x2029, 0x202E)), None)
    if bad is not None:
        return f"holds the control character U+{ord(bad):04X}"
    try:
        fields = placeholders(text)
    except ValueError as exc:
        return f"cannot be formatted: {exc}"
    names = set()
    for name, conv, spec in fields:
        if not name.isidentifier():
            return f"placeholder {{{name[:40]}}} is not a bare name (no attributes, indexes or positions)"
        if conv or spec:
            return f"placeholder {{{name}}} has a conversion or format spec"
        if name not in ALLOWED_PLACEHOLDERS:
            return f"unknown placeholder {{{name[:40]}}}; templates may use {', '.join(sorted(ALLOWED_PLACEHOLDERS))}"
        names.add(name)
    missing = sorted(set(required) - names)
    if missing:
        return f"drops the required placeholder(s) {', '.join('{' + m + '}' for m in missing)}"
    return None


class TemplatePopulation:
    """The run's templates and their statistics (in memory; rebuilt from the store on resume).

    Args:
        size: Active templates kept per name (``prompt.population``); a new one past it
            retires the active template of lowest fitness among those with ``min_uses``
            children (none retired while every other one has fewer).
        explore: :math:`c` of UCB1 (``prompt.explore``).
        min_uses: Children a template needs before it can be retired.
    """

    def __init__(self, *, size: int = 8, explore: float = 1.0, min_uses: int = 3) -> None:
        if size < 1:
            raise ValueError(f"prompt.population must be >= 1, got {size}")
        if explore < 0 or not math.isfinite(explore):
            raise ValueError(f"prompt.explore must be a finite number >= 0, got {explore}")
        self.size, self.explore, self.min_uses = size, float(explore), int(min_uses)
        self.templates: dict[str, PromptTemplate] = {}  # insertion order = creation order
        self.stats: dict[str, TemplateStats] = {}
        self.in_flight: dict[str, int] = {}

    # -- building ----------------------------------------------------------------------
    def add(self, template: PromptTemplate) -> None:
        """Add a template (and apply its ``retires``) as it was stored."""
        self.templates[template.id] = template
        self.stats.setdefault(template.id, TemplateStats())
        if template.retires in self.templates and template.status == "active":
            self.templates[template.retires].status = "retired"

    def retiree(self, name: str) -> str | None:
        """The template a new active template of ``name`` pushes out, if the population is full."""
        active = self.active(name)
        if len(active) < self.size:
            return None
        ripe = [t for t in active if self.stats[t.id].n >= self.min_uses]
        if not ripe:
            return None
        return min(ripe, key=lambda t: (self.stats[t.id].fitness, -self.stats[t.id].n)).id

    def credit(self, template_id: str, reward: float) -> None:
        """One child of ``template_id`` told, with reward ``reward`` in [0, 1]."""
        st = self.stats.setdefault(template_id, TemplateStats())
        st.n += 1
        st.total += float(reward)

    # -- reading -----------------------------------------------------------------------
    def active(self, name: str | None = None) -> list[PromptTemplate]:
        return [t for t in self.templates.values() if t.status == "active" and (name is None or t.name == name)]

    def children(self) -> int:
        """Children credited to any template."""
        return sum(s.n for s in self.stats.values())

    def ucb(self, template_id: str, total: int) -> float:
        """:math:`\\operatorname{UCB}(t)` of the module docstring (in-flight children count as tried)."""
        st = self.stats[template_id]
        n = st.n + self.in_flight.get(template_id, 0)
        mean = (st.total + 0.5) / (n + 1)
        return mean + self.explore * math.sqrt(2.0 * math.log(total + 1) / (n + 1))

    def choose(self, name: str) -> PromptTemplate | None:
        """The active template of ``name`` with the largest UCB (the oldest among ties)."""
        active = self.active(name)
        if not active:
            return None
        total = sum(self.stats[t.id].n + self.in_flight.get(t.id, 0) for t in active)
        return max(active, key=lambda t: self.ucb(t.id, total))  # max keeps the first of ties

    def best(self) -> PromptTemplate | None:
        """The active template to mutate next: highest fitness among those with children,
        the most used among ties, else the oldest active one."""
        active = self.active()
        if not active:
            return None
        return max(active, key=lambda t: (self.stats[t.id].n > 0, self.stats[t.id].fitness, self.stats[t.id].n))

    def summary(self) -> list[dict[str, Any]]:
        """One row per template (id, parent, name, origin, status, children, fitness)."""
        return [{"id": t.id, "parent_id": t.parent_id, "name": t.name, "origin": t.origin, "status": t.status,
                 "generation": t.generation, "children": self.stats[t.id].n,
                 "fitness": round(self.stats[t.id].fitness, 6)} for t in self.templates.values()]
