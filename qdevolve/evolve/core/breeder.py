"""The breeder: (rng, archive, selection, operators) -> child plans -> child programs.

The *ask* half of the engine (the pyribs emitter's job). :meth:`Breeder.plan` draws an
operator by weight, samples its parents from the archive with the selection rule and
builds the :class:`~qdevolve.mutation.base.MutationContext`; the engine awaits the
operator's ``propose`` and :meth:`Breeder.children` turns the candidates into
:class:`Child` records (program, rollout, inspiration edges) ready for ``tell``.

``group_size`` children are asked of one parent and one prompt (the RL group; ThetaEvolve
and TTT-Discover sample many completions of one prompt); the budget may cut the last group.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.db.records import EdgeRecord
from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError
from qdevolve.evolve.setup import RunConfig
from qdevolve.mutation.base import Candidate, Mutation, MutationContext
from qdevolve.types import Elite, EvalResult, Program, Rollout

__all__ = ["Breeder", "ChildPlan", "Child", "ProgramCache", "build_operators", "RAW_REPLY_LIMIT"]

RAW_REPLY_LIMIT = 20_000
CACHE_LIMIT = 20_000


def build_operators(config: RunConfig) -> tuple[list[Mutation], np.ndarray, list[str]]:
    """The configured operators (default: diff/rewrite/crossover with a model, else ``ast``),
    their normalised weights and names."""
    specs = config.mutation or ([{"type": "diff", "weight": 0.7}, {"type": "rewrite", "weight": 0.2},
                                 {"type": "crossover", "weight": 0.1}] if config.backend
                                else [{"type": "ast", "weight": 1.0}])
    ops, weights, names = [], [], []
    for spec in specs:
        spec = dict(spec)
        w = float(spec.pop("weight", 1.0))
        if w <= 0:
            continue
        op = registry.mutation.create(spec)
        if not isinstance(op, Mutation):
            raise ConfigError(f"mutation '{spec['type']}': the operator must declare n_parents and needs_backend "
                              "(see qdevolve.mutation.base.Mutation)")
        if op.needs_backend and not config.backend:
            raise ConfigError(
                f"mutation '{spec['type']}' needs a model: pass --backend openai --model NAME "
                f"[--api-base URL] (or a 'backend' section in config.yaml), or use --mutation ast")
        op.name = spec["type"]  # type: ignore[attr-defined]  # the name it was asked by (an alias too)
        ops.append(op)
        weights.append(w)
        names.append(spec["type"])
    if not ops:
        raise ConfigError("mutation: no operator with a positive weight")
    return ops, np.asarray(weights) / sum(weights), names


class ProgramCache:
    """Programs and results the breeder reads as parents, inspirations and prompts.

    Holds every ``ok`` program told this session (trimmed to the archive's elites past
    ``CACHE_LIMIT``) and falls back to the store for the rest.
    """

    def __init__(self, store: LineageStore) -> None:
        self.store = store
        self._items: dict[str, tuple[Program, EvalResult]] = {}

    def remember(self, program: Program, result: EvalResult, keep: Callable[[], set[str]]) -> None:
        self._items[program.id] = (program, result)
        if len(self._items) > CACHE_LIMIT:
            kept = keep()
            self._items = {k: v for k, v in self._items.items() if k in kept}

    def get(self, program_id: str) -> tuple[Program, EvalResult]:
        hit = self._items.get(program_id)
        if hit is None:
            prog = self.store.get_program(program_id)
            res = self.store.get_evaluation(program_id) or EvalResult(status="error", error="missing")
            hit = self._items[program_id] = (prog, res)
        return hit


@dataclass
class ChildPlan:
    """One parent (plus co-parents and inspirations) and the operator that will mutate it."""

    iteration: int
    operator: Mutation
    operator_name: str
    parent: Program
    context: MutationContext
    n: int  # children reserved from the budget for this plan
    duplicates: list[Child] = field(default_factory=list)  # rejected copies, rewarded as rollouts
    template_id: str | None = None  # the evolved prompt template asked (qdevolve.evolve.core.prompt_population)


@dataclass
class Child:
    """A proposed child ready for ``tell``: its program, rollout and extra edges.

    ``failed`` holds the ``invalid`` result of a failed mutation (nothing to evaluate).
    """

    program: Program
    candidate: Candidate
    rollout: Rollout | None = None
    edges: list[EdgeRecord] = field(default_factory=list)
    failed: EvalResult | None = None


class Breeder:
    """Turns the archive into child plans and candidates into children (module docstring)."""

    def __init__(self, *, run_id: str, rng: np.random.Generator, archive: Any, selection: Any,
                 operators: list[Mutation], weights: np.ndarray, names: list[str], cache: ProgramCache,
                 config: RunConfig, prompt_settings: dict[str, Any], group_size: int = 1) -> None:
        if group_size < 1:
            raise ConfigError(f"group_size must be >= 1, got {group_size}")
        self.run_id, self.rng, self.archive, self.selection = run_id, rng, archive, selection
        self.operators, self.weights, self.names = operators, weights, names
        self.cache, self.settings = cache, prompt_settings
        self.inspirations = config.inspirations
        self.group_size = group_size
        self.n_islands = int(getattr(archive, "n_islands", 1) or 1)  # only the islands archive has several
        self._singles = [i for i, op in enumerate(operators) if op.n_parents == 1]
        self.prompts: Any = None  # a PromptEvolution when prompt.evolve is on

    def plan(self, iteration: int, budget_left: int) -> ChildPlan:
        """Draw an operator and its parents; reserve up to ``group_size`` children."""
        k = int(self.rng.choice(len(self.operators), p=self.weights))
        island = iteration % self.n_islands if self.n_islands > 1 else None
        n_par = self.operators[k].n_parents
        elites = self.archive.sample(self.rng, self.selection, island=island, n=n_par)
        if n_par > 1:
            elites = self._distinct_parents(elites, island)
            if len(elites) < n_par:  # too few programs to cross yet: use a one-parent operator
                if self._singles:
                    w = self.weights[self._singles] / self.weights[self._singles].sum()
                    k = self._singles[int(self.rng.choice(len(self._singles), p=w))]
                elites = elites[:1]
        op = self.operators[k]
        parent, parent_res = self.cache.get(elites[0].program_id)
        others = [self.cache.get(e.program_id) for e in elites[1:]]
        insp: list[tuple[Program, EvalResult]] = []
        n_best, n_diverse = int(self.inspirations.get("n_best", 2)), int(self.inspirations.get("n_diverse", 2))
        if op.needs_backend and (n_best or n_diverse):
            insp = [self.cache.get(e.program_id) for e in self.archive.inspirations(
                parent.id, self.rng, n_best=n_best, n_diverse=n_diverse, island=island)]
        n = max(1, min(self.group_size, budget_left))
        ctx = MutationContext(rng=self.rng, parent_result=parent_res, inspirations=insp, other_parents=others,
                              iteration=iteration, island=island if island is not None else parent.island,
                              n=n, settings=self.settings)
        template_id = self._use_template(op, ctx)
        return ChildPlan(iteration, op, self.names[k], parent, ctx, n, template_id=template_id)

    def _use_template(self, op: Mutation, ctx: MutationContext) -> str | None:
        """With evolving prompts, put the chosen template of the operator's format in the
        context's settings; its id (``None``: the fixed templates)."""
        from qdevolve.prompts import TEMPLATE_NAMES

        name = TEMPLATE_NAMES.get(str(getattr(op, "edit_format", "")))
        if self.prompts is None or not op.needs_backend or name is None:
            return None
        t = self.prompts.choose(name)
        if t is None:
            return None
        ctx.settings = {**self.settings, "templates": {**(self.settings.get("templates") or {}), name: t.text}}
        return t.id

    def _distinct_parents(self, elites: list[Elite], island: int | None) -> list[Elite]:
        """Parents with distinct programs: redraw duplicates, then any other elite at random."""
        out, seen = [], set()
        for e in elites:
            if e.program_id not in seen:
                out.append(e)
                seen.add(e.program_id)
        want = len(elites)
        for _ in range(4):
            if len(out) >= want:
                break
            for e in self.archive.sample(self.rng, self.selection, island=island, n=want - len(out)):
                if e.program_id not in seen:
                    out.append(e)
                    seen.add(e.program_id)
        if len(out) < want:
            others = [e for e in self.archive.elites() if e.program_id not in seen]
            while others and len(out) < want:
                e = others.pop(int(self.rng.integers(len(others))))
                out.append(e)
                seen.add(e.program_id)
        return out

    def children(self, plan: ChildPlan, candidates: list[Candidate]) -> list[Child]:
        """The plan's children (at most ``plan.n``), failed mutations included."""
        children = [self._child(plan, cand) for cand in candidates[:plan.n]]
        for c in children:  # group_n: the plan's rollouts in this group (the trainer waits for them all)
            if c.rollout is not None and c.rollout.group_id is not None:
                c.rollout.metadata["group_n"] = sum(1 for o in children if o.rollout is not None
                                                    and o.rollout.group_id == c.rollout.group_id)
        return children

    def _child(self, plan: ChildPlan, cand: Candidate) -> Child:
        parent, ctx = plan.parent, plan.context
        gens = [parent.generation] + [p.generation for p, _ in ctx.other_parents]
        meta = dict(cand.metadata)
        comp = cand.completion
        if comp is not None:
            meta["usage"] = {"prompt_tokens": comp.prompt_tokens, "completion_tokens": comp.completion_tokens,
                             "model": comp.model, "latency_s": round(float(comp.latency_s or 0.0), 4)}
            if comp.es_member is not None:
                meta["usage"]["es_member"] = comp.es_member
        if cand.code is None:
            meta.update(failed_mutation=True, reason=cand.error)
        if plan.template_id is not None:
            meta["template_id"] = plan.template_id
        program = Program(code=cand.code if cand.code is not None else "", run_id=self.run_id,
                          language=parent.language, parent_ids=tuple(dict.fromkeys(cand.parent_ids)) or (parent.id,),
                          generation=1 + max(gens), island=ctx.island, operator=cand.operator or plan.operator_name,
                          prompt_hash=cand.prompt_hash,
                          policy_version=None if comp is None else comp.policy_version, metadata=meta)
        rollout = None
        if comp is not None:
            rollout = Rollout(prompt=cand.prompt or "", completion=comp.text, run_id=self.run_id,
                              token_ids=list(comp.token_ids), logprobs=list(comp.logprobs),
                              prompt_token_ids=list(comp.prompt_token_ids), policy_version=comp.policy_version,
                              program_id=program.id, group_id=cand.group_id, finish_reason=comp.finish_reason,
                              prompt_tokens=comp.prompt_tokens, completion_tokens=comp.completion_tokens,
                              metadata={"operator": program.operator, "parent_ids": list(program.parent_ids),
                                        "model": comp.model,
                                        **({} if plan.template_id is None else {"template_id": plan.template_id}),
                                        **({} if comp.es_member is None else {"es_member": comp.es_member})})
        failed = None
        if cand.code is None:
            failed = EvalResult(status="invalid", error=(cand.error or "mutation failed")[:500],
                                artifacts={"raw_reply": (cand.raw or "")[:RAW_REPLY_LIMIT], "reason": cand.error or ""})
        edges = [EdgeRecord(p.id, program.id, "inspiration", 0, self.run_id) for p, _ in ctx.inspirations]
        return Child(program, cand, rollout, edges, failed)
