"""The engine's side of evolving prompts (``prompt: {evolve: true, every: K, population: N}``).

:class:`PromptEvolution` owns the run's :class:`~qdevolve.prompts.evolution.TemplatePopulation`:

* the breeder asks it for a template per plan (UCB1 among the active templates of the
  operator's edit format) and the child records the template's id in
  ``metadata["template_id"]`` (the rollout too);
* every ``every`` credited children the engine awaits :meth:`PromptEvolution.evolve` before a
  plan: the ``template_mutator`` plugin (kind ``prompt_mutator``: ``model`` with a backend,
  else ``offline``) rewrites the fittest template; the result is validated and kept as
  ``active`` or ``invalid`` (with the reason), and past ``population`` it retires the worst;
* new templates (the seeds included) wait in :meth:`pending` and are committed with the next
  ``tell``'s transaction; only then do they count as stored;
* a child's reward is credited after its ``tell`` committed.

Resume rebuilds the population from the store alone: the template rows in order, and each
stored child's reward recomputed from its evaluation and its parent's
(:meth:`PromptEvolution.rebuild`), so the statistics are exactly those the run had.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError
from qdevolve.prompts import TEMPLATE_NAMES, load_template
from qdevolve.prompts.evolution import (
    MAX_TEMPLATE_CHARS,
    TemplatePopulation,
    improvement_reward,
    placeholders,
    validate_template,
)
from qdevolve.types import EvalResult, Program, PromptTemplate, new_id

__all__ = ["PromptEvolution", "EVOLVE_KEYS", "replay_population"]

#: The keys of the ``prompt`` section this module reads (the prompt builder ignores them).
EVOLVE_KEYS = ("evolve", "every", "population", "explore", "template_mutator", "max_template_chars")


def _positive_int(prompt: dict[str, Any], key: str, default: int) -> int:
    value = prompt.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"config: prompt.{key} must be a whole number >= 1, got {value!r}")
    return value


def replay_population(store: LineageStore, run_id: str, population: TemplatePopulation | None = None,
                      ) -> tuple[TemplatePopulation, dict[str, list[str]]]:
    """The run's template population rebuilt from the store (rows in order, then every stored
    child credited with its reward) and each template's children (program ids, in order)."""
    pop = population if population is not None else TemplatePopulation()
    for t in store.prompt_templates(run_id):
        pop.add(t)
    kids: dict[str, list[str]] = {}
    scores: dict[str, tuple[bool, float | None]] = {}
    for _seq, prog, res in store.iter_evaluated(run_id):
        scores[prog.id] = (res.ok, res.score)
        tid = prog.metadata.get("template_id")
        if isinstance(tid, str) and tid in pop.templates:
            parent = scores.get(prog.parent_ids[0]) if prog.parent_ids else None
            pop.credit(tid, PromptEvolution.reward(prog, res, parent))
            kids.setdefault(tid, []).append(prog.id)
    return pop, kids


class PromptEvolution:
    """The template population of one run (module docstring)."""

    def __init__(self, *, names: list[str], settings: dict[str, Any], every: int, population: int,
                 explore: float, mutator: Any, max_chars: int) -> None:
        self.names, self.settings, self.every, self.max_chars = names, settings, every, max_chars
        try:
            self.population = TemplatePopulation(size=population, explore=explore)
        except ValueError as exc:
            raise ConfigError(f"config: {exc}") from None
        self.mutator = mutator
        self._pending: list[PromptTemplate] = []
        self._evolving = False

    @classmethod
    def from_config(cls, prompt: dict[str, Any], operators: list[Any], settings: dict[str, Any],
                    has_backend: bool) -> PromptEvolution | None:
        """``None`` unless ``prompt.evolve`` is true and some operator asks a model."""
        evolve = prompt.get("evolve", False)
        if not isinstance(evolve, bool):
            raise ConfigError(f"config: prompt.evolve must be true or false, got {evolve!r}")
        if not evolve:
            return None
        names = list(dict.fromkeys(TEMPLATE_NAMES[op.edit_format] for op in operators
                                   if getattr(op, "needs_backend", False)
                                   and getattr(op, "edit_format", None) in TEMPLATE_NAMES))
        if not names:
            raise ConfigError("config: prompt.evolve needs an operator that asks a model (diff, rewrite, "
                              "crossover); --mutation ast builds no prompt")
        spec = prompt.get("template_mutator") or {"type": "model" if has_backend else "offline"}
        if isinstance(spec, str):
            spec = {"type": spec}
        if not isinstance(spec, dict):
            raise ConfigError(f"config: prompt.template_mutator must be a name or {{type: NAME}}, got {spec!r}")
        explore = prompt.get("explore", 1.0)
        if isinstance(explore, bool) or not isinstance(explore, (int, float)):
            raise ConfigError(f"config: prompt.explore must be a number, got {explore!r}")
        return cls(names=names, settings=settings, every=_positive_int(prompt, "every", 10),
                   population=_positive_int(prompt, "population", 8), explore=float(explore),
                   mutator=registry.prompt_mutator.create(dict(spec)),
                   max_chars=_positive_int(prompt, "max_template_chars", MAX_TEMPLATE_CHARS))

    # -- rebuilding ------------------------------------------------------------------------
    def rebuild(self, store: LineageStore, run_id: str) -> None:
        """The population as the store holds it; seeds made (pending) for names it lacks."""
        self.population.templates.clear()
        self.population.stats.clear()
        self._pending.clear()
        replay_population(store, run_id, self.population)
        have = {t.name for t in self.population.templates.values() if t.origin == "seed"}
        for name in self.names:
            if name not in have:
                self._stage(PromptTemplate(id=new_id(), name=name, text=load_template(name, self.settings)))

    @staticmethod
    def reward(program: Program, result: EvalResult, parent: tuple[bool, float | None] | None) -> float:
        """The child's improvement reward (:func:`qdevolve.prompts.evolution.improvement_reward`)."""
        parent_score = parent[1] if parent is not None and parent[0] else None
        return improvement_reward(result.score, parent_score, result.ok)

    def _stage(self, template: PromptTemplate) -> None:
        self.population.add(template)
        self._pending.append(template)

    # -- the breeder's side ------------------------------------------------------------------
    def choose(self, name: str) -> PromptTemplate | None:
        """The template for one plan (counted in flight until :meth:`release`)."""
        t = self.population.choose(name)
        if t is not None:
            self.population.in_flight[t.id] = self.population.in_flight.get(t.id, 0) + 1
        return t

    def release(self, template_id: str | None) -> None:
        if template_id is not None and self.population.in_flight.get(template_id, 0) > 0:
            self.population.in_flight[template_id] -= 1

    # -- evolution ---------------------------------------------------------------------------
    def due(self) -> bool:
        """Every ``every`` credited children, one template mutation."""
        made = sum(1 for t in self.population.templates.values() if t.origin != "seed")
        return not self._evolving and self.population.children() // self.every > made

    async def evolve(self, rng: np.random.Generator, backend: Any) -> PromptTemplate | None:
        """Mutate the fittest template; the new one (valid or not) is staged for the next tell."""
        parent = self.population.best()
        if parent is None:
            return None
        self._evolving = True
        try:
            edit = await self.mutator.mutate(parent, rng, backend)
        finally:
            self._evolving = False
        required = {f for f, _c, _s in placeholders(parent.text)}
        reason = edit.reason if edit.text is None else validate_template(edit.text, required,
                                                                         max_chars=self.max_chars)
        status = "active" if reason is None else "invalid"
        child = PromptTemplate(id=new_id(), name=parent.name, text=(edit.text or "")[: 4 * self.max_chars],
                               parent_id=parent.id, origin=str(getattr(self.mutator, "name", "mutator")),
                               status=status, reason=reason, generation=parent.generation + 1,
                               metadata=dict(edit.metadata))
        if status == "active":
            child.retires = self.population.retiree(parent.name)
        self._stage(child)
        return child

    # -- the tell's side ---------------------------------------------------------------------
    def pending(self) -> list[PromptTemplate]:
        """Templates made since the last commit (stored with the next tell)."""
        return list(self._pending)

    def committed(self, stored: list[PromptTemplate], program: Program, result: EvalResult,
                  parent: tuple[bool, float | None] | None) -> None:
        """After a tell's commit: its templates are stored, its child is credited."""
        ids = {t.id for t in stored}
        self._pending = [t for t in self._pending if t.id not in ids]
        tid = program.metadata.get("template_id")
        if isinstance(tid, str) and tid in self.population.templates:
            self.population.credit(tid, self.reward(program, result, parent))
