"""One policy evolving every suite target at once, trained inside the loop.

Each target keeps its own population (distinct programs with their pass bits) that starts
from :data:`~qdevolve.rl.tasks.suite.SEED_PARENT`. A round visits ``groups_per_step``
targets in a fixed cyclic order (every target gets the same number of samples); for each
it picks a parent (the best program with probability ``greedy``, else one of the
``top_parents`` best), renders the edit prompt (examples | parent | parent's bits) and
samples ``group`` children of that one prompt from the shared policy: one RL group per
parent, every rollout keeping its prompt's token ids. The round's groups are one trainer
step (:class:`~qdevolve.rl.trainer.PolicyTrainer`, any registered advantage objective), or,
for ``es``, one member of the ES population (:class:`~qdevolve.rl.es.GroupES`: the round is
sampled under the member's perturbed weights and its mean reward is the member's fitness).

Reward of a child (``reward``): ``score`` (the fraction of examples passed) or ``binary``
(all passed); a child equal to its parent earns ``lazy`` instead (ThetaEvolve's lazy
penalty; 0 for binary rewards). Per group: ``reward_vectors`` = the pass bits (VPO's vector
reward, also its ``candidate_vectors`` with m = 1), ``outcome_keys`` = the semantic class
(IPS), ``cluster_keys`` = the semantic class (Rare).

Measured at sample checkpoints: targets solved, the mean over targets of the top-50 mean
score (distinct programs), distinct semantic classes of correct programs per solved target;
per policy version: targets solved when it was made. This module never reads the held-out
targets (:mod:`qdevolve.rl.tasks.suite_heldout`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from qdevolve.rl.tasks.suite import SEED_PARENT, ChildScore, SuiteTarget, score_child

__all__ = ["SUITE_BASE", "suite_base_dir", "load_policy", "LoopConfig", "TargetState", "SuiteLoop",
           "policy_pass_at"]

SUITE_BASE: dict[str, Any] = {"sft_steps": 400}


def suite_base_dir(seed: int = 0, cache_dir: str | Path | None = None) -> Path:
    """The shared policy's pre-trained base for ``seed`` (built once, then cached)."""
    from qdevolve.rl.tiny import tiny_policy_dir

    return tiny_policy_dir("suite_edit", cache_dir, seed=seed, **SUITE_BASE)


def load_policy(path: str | Path) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a policy directory (fp32, CPU, eval mode)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return model, tok


@dataclass
class LoopConfig:
    """Settings of one :class:`SuiteLoop` (see the module docstring)."""

    objective: dict[str, Any] | None = None  # None: the frozen base (no update)
    reward: str = "score"
    samples: int = 4096
    group: int = 8
    groups_per_step: int = 8
    lr: float = 1e-3
    lazy: float = -0.3
    greedy: float = 0.5
    top_parents: int = 8
    temperature: float = 1.0
    max_new_tokens: int = 10
    checkpoints: Sequence[int] = ()
    seed: int = 0
    trainer: dict[str, Any] = field(default_factory=dict)


class TargetState:
    """One target's population and what it found."""

    def __init__(self, target: SuiteTarget) -> None:
        self.target = target
        seed = score_child(target, SEED_PARENT)
        self.programs: dict[str, ChildScore] = {seed.text: seed}
        self.correct_classes: set[str] = set()
        self.solved_at: int | None = None

    def parent(self, rng: np.random.Generator, greedy: float, top: int) -> ChildScore:
        ranked = sorted(self.programs.values(), key=lambda c: (-c.score, len(c.text), c.text))
        best = [c for c in ranked if c.score == ranked[0].score]
        pool = best if rng.random() < greedy else ranked[:top]
        return pool[int(rng.integers(len(pool)))]

    def add(self, child: ChildScore, samples: int) -> None:
        if child.valid and child.text not in self.programs:
            self.programs[child.text] = child
        if child.correct:
            self.correct_classes.add(child.semantic or child.text)
            if self.solved_at is None:
                self.solved_at = samples

    def top50(self) -> float:
        scores = sorted((c.score for c in self.programs.values()), reverse=True)[:50]
        return statistics.fmean(scores) if scores else 0.0


class SuiteLoop:
    """The shared-policy loop over many targets (module docstring).

    Args:
        targets: The training targets.
        model, tokenizer: The policy (trained in place unless ``config.objective`` is None).
        config: :class:`LoopConfig`.
        on_version: Called as ``on_version(version, record)`` after each policy update.
    """

    def __init__(self, targets: Sequence[SuiteTarget], model: Any, tokenizer: Any, config: LoopConfig,
                 on_version: Callable[[int, dict[str, Any]], None] | None = None) -> None:
        import torch

        from qdevolve import registry
        from qdevolve.rl.config import TrainerConfig
        from qdevolve.rl.trainer import PolicyTrainer

        if not targets:
            raise ValueError("SuiteLoop needs at least one target")
        if config.reward not in ("score", "binary"):
            raise ValueError(f"LoopConfig.reward must be 'score' or 'binary', got {config.reward!r}")
        self.config, self.model, self.tok = config, model, tokenizer
        self.states = [TargetState(t) for t in targets]
        self.rng = np.random.default_rng(config.seed)
        self.gen = torch.Generator().manual_seed(config.seed)
        self.on_version = on_version
        self.trainer = None
        self.es = None
        if config.objective is not None:
            objective = registry.objective.create(dict(config.objective))
            objective.name = config.objective["type"]
            tconf = TrainerConfig(learning_rate=config.lr, max_completion_length=config.max_new_tokens,
                                  seed=config.seed, **config.trainer)
            self.trainer = PolicyTrainer(model, tokenizer, objective, tconf)
            if self.trainer.es is not None:
                from qdevolve.rl.es import GroupES

                self.es = GroupES(self.trainer.es.objective, model)
        self.samples = 0
        self.version = 0
        self.versions: list[dict[str, Any]] = [{"version": 0, "samples": 0, "solved": 0}]
        self.curves: dict[str, list[float]] = {k: [] for k in ("samples", "solved", "top50", "classes_per_solved",
                                                                "classes_total")}
        self.step_seconds: list[float] = []
        self.sample_seconds = 0.0
        self.evaluations = 0
        self._cursor = 0

    # -- measurements ----------------------------------------------------------------------
    @property
    def solved(self) -> int:
        return sum(s.solved_at is not None for s in self.states)

    def snapshot(self) -> dict[str, float]:
        solved = [s for s in self.states if s.solved_at is not None]
        return {"samples": float(self.samples), "solved": float(len(solved)),
                "top50": statistics.fmean(s.top50() for s in self.states),
                "classes_per_solved": statistics.fmean(len(s.correct_classes) for s in solved) if solved else 0.0,
                "classes_total": float(sum(len(s.correct_classes) for s in self.states))}

    # -- the loop ----------------------------------------------------------------------------
    def _reward(self, child: ChildScore, parent: ChildScore) -> float:
        if child.text == parent.text:
            return 0.0 if self.config.reward == "binary" else self.config.lazy
        return float(child.correct) if self.config.reward == "binary" else child.score

    def round(self) -> None:
        """One round: ``groups_per_step`` parents, ``group`` children each, one update."""
        from qdevolve.rl.group import RolloutGroup
        from qdevolve.rl.sampling import encode_prompt, sample_batch

        c = self.config
        chosen = []
        for _ in range(c.groups_per_step):
            chosen.append(self.states[self._cursor % len(self.states)])
            self._cursor += 1
        parents = [s.parent(self.rng, c.greedy, c.top_parents) for s in chosen]
        prompts = [s.target.prompt(p.text) for s, p in zip(chosen, parents, strict=True)]
        t0 = time.perf_counter()
        if self.es is not None:
            member = self.es.assign()
            with self.es.perturbed(member):
                out = sample_batch(self.model, self.tok, prompts, c.group, c.max_new_tokens, c.temperature, self.gen)
        else:
            out = sample_batch(self.model, self.tok, prompts, c.group, c.max_new_tokens, c.temperature, self.gen)
        self.sample_seconds += time.perf_counter() - t0
        groups = []
        due = [x for x in c.checkpoints if self.samples < x]
        for state, parent, prompt, samples in zip(chosen, parents, prompts, out, strict=True):
            kids = [score_child(state.target, text) for text, _, _ in samples]
            for kid in kids:
                self.samples += 1
                if kid.valid and kid.text not in state.programs:
                    self.evaluations += 1
                state.add(kid, self.samples)
            rewards = [self._reward(k, parent) for k in kids]
            if self.es is not None:
                for r in rewards:
                    self.es.record(member, r)
                continue
            keys = [k.semantic or f"invalid:{k.text}" for k in kids]
            vectors = np.array([k.vector for k in kids], dtype=float)
            groups.append(RolloutGroup(rewards=rewards, reward_vectors=vectors, outcome_keys=keys,
                                       cluster_keys=keys, candidate_vectors=vectors[:, None, :],
                                       token_ids=[s[1] for s in samples], old_logprobs=[s[2] for s in samples],
                                       prompt=prompt, prompt_id=state.target.name,
                                       metadata={"prompt_token_ids": encode_prompt(self.tok, prompt)}))
        for x in due:
            if self.samples >= x:
                self._record()
        self._update(groups)

    def _update(self, groups: list[Any]) -> None:
        if self.trainer is None:
            return
        t0 = time.perf_counter()
        if self.es is not None:
            self.es.finish()
            if not self.es.ready:
                return
            self.es.update()
        else:
            self.trainer.step(groups)
        self.step_seconds.append(time.perf_counter() - t0)
        self.version += 1
        record = {"version": self.version, "samples": self.samples, "solved": self.solved}
        self.versions.append(record)
        if self.on_version is not None:
            self.on_version(self.version, record)

    def _record(self) -> None:
        for k, v in self.snapshot().items():
            self.curves[k].append(v)

    def run(self) -> dict[str, Any]:
        """Rounds until ``config.samples`` samples are drawn; the measurements."""
        t0 = time.perf_counter()
        while self.samples < self.config.samples:
            self.round()
        if not self.curves["samples"] or self.curves["samples"][-1] < self.samples:
            self._record()
        wall = time.perf_counter() - t0
        return {"curves": self.curves, "versions": self.versions, "samples": self.samples,
                "evaluations": self.evaluations, "wall_s": wall, "sample_seconds": self.sample_seconds,
                "step_seconds": self.step_seconds,
                "solved_at": {s.target.name: s.solved_at for s in self.states},
                "classes": {s.target.name: len(s.correct_classes) for s in self.states}}


def policy_pass_at(model: Any, tokenizer: Any, targets: Sequence[SuiteTarget], *, n: int = 128,
                   ks: Sequence[int] = (1, 8, 64), seed: int = 0) -> dict[str, Any]:
    """pass@k (unbiased, from ``n`` samples) of the policy from the seed parent, per target."""
    import torch

    from qdevolve.rl.metrics import pass_at_k
    from qdevolve.rl.sampling import sample_batch

    gen = torch.Generator().manual_seed(seed)
    rows = {}
    for start in range(0, len(targets), 4):
        chunk = targets[start:start + 4]
        out = sample_batch(model, tokenizer, [t.prompt(SEED_PARENT) for t in chunk], n, 10, 1.0, gen)
        for t, samples in zip(chunk, out, strict=True):
            c = sum(score_child(t, s[0]).correct for s in samples)
            rows[t.name] = {f"pass@{k}": float(pass_at_k(n, c, k)) for k in ks}
    return rows
