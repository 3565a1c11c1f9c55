"""The joined system: the outer archive fed by an inner policy trained while it evolves.

Every mutation of the ``policy`` operator is a rollout sampled through the shared backend
(in-process ``transformers`` on CPU, ``vllm`` with a LoRA adapter per version on GPU); the
sandbox result of the program it produced is its reward; the ``n`` completions for one
parent prompt form one RL group; every ``every`` evaluations the trainer takes a step on
the groups completed since the last one, saves a new policy version in the lineage store,
and the backend serves it to the next mutations.

Reward (``train.reward``; the validity gate first: a failed mutation or any status other
than ``ok`` earns ``invalid_reward``, default 0):

* ``score`` (default): the program's score;
* ``improvement``: score minus the parent's score;
* ``tests``: the mean of the per-test vector (falls back to the score).

The per-test vector (or ``[score]``) is the reward vector (VPO). Cluster keys
(``train.cluster``) come from a ``cluster`` plugin: ``archive_cell`` (the niche the child
landed in; children not admitted share ``cell:none``) or ``outcome`` (hash of the per-test
vector and score), or any registered clusterer.

``train`` settings (``config.yaml`` section or the ``--policy``/``--train-objective``/
``--train-every``/``--objective-arg`` flags): ``policy`` (``tiny``, a Hugging Face model
directory, or ``vllm:PATH``), ``task`` (the tiny policy's task, default ``expr_dsl``),
``objective`` (``{type: ips, ...}``), ``every``, ``reward``, ``invalid_reward``,
``cluster``, ``outcome`` (IPS's outcome identity: ``text`` of the completion or its
``behaviour``), ``correct_threshold`` (reward counted as correct for D_n), ``trainer``
(:class:`qdevolve.rl.config.TrainerConfig` fields), ``operator`` (options of the
``policy`` mutation operator: ``prompt_template``, ``block_template``, ``temperature``...).
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.errors import ConfigError
from qdevolve.evolve.config import RunConfig
from qdevolve.evolve.engine import Evolution
from qdevolve.mutation.base import Candidate
from qdevolve.types import EvalResult, Program

__all__ = ["JoinedEvolution", "TrainSettings", "apply_policy_options"]

REWARDS = ("score", "improvement", "tests")


@dataclass(frozen=True, kw_only=True)
class TrainSettings:
    """The ``train`` section, validated."""

    policy: str = "tiny"
    task: str = "expr_dsl"
    objective: dict[str, Any] = field(default_factory=lambda: {"type": "grpo"})
    every: int = 32
    reward: str = "score"
    invalid_reward: float = 0.0
    cluster: dict[str, Any] = field(default_factory=lambda: {"type": "archive_cell"})
    correct_threshold: float = 1.0
    outcome: str = "text"
    trainer: dict[str, Any] = field(default_factory=dict)
    operator: dict[str, Any] = field(default_factory=dict)
    backend: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, where: str = "train") -> TrainSettings:
        d = dict(d or {})
        known = set(cls.__dataclass_fields__)
        bad = sorted(set(d) - known)
        if bad:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(bad)}; known keys: {', '.join(sorted(known))}")
        for key in ("objective", "cluster"):
            if isinstance(d.get(key), str):
                d[key] = {"type": d[key]}
        s = cls(**d)
        if s.reward not in REWARDS:
            raise ConfigError(f"{where}.reward must be one of {', '.join(REWARDS)}, got {s.reward!r}")
        if s.outcome not in ("text", "behaviour"):
            raise ConfigError(f"{where}.outcome must be 'text' or 'behaviour', got {s.outcome!r}")
        if s.every < 1:
            raise ConfigError(f"{where}.every must be >= 1, got {s.every}")
        if s.objective.get("type") == "es":
            raise ConfigError(f"{where}.objective: 'es' is a parameter-space method; the joined loop trains with "
                              "advantage objectives (grpo, dr_grpo, ips, rare, passk, lad, vpo, ...); use "
                              "'qdevolve train --objective es' for ES")
        return s


def _parse_value(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_policy_options(config: RunConfig, *, policy: str | None, objective: str | None,
                         every: int | None, objective_args: tuple[str, ...] = ()) -> RunConfig:
    """Fold the ``--policy``/``--train-*`` flags into the config's ``train`` section."""
    train = dict(config.train or {})
    if policy:
        train["policy"] = policy
    obj = dict(train.get("objective") or {"type": "grpo"}) if not isinstance(train.get("objective"), str) \
        else {"type": train["objective"]}
    if objective:
        obj = {"type": objective} if obj.get("type") != objective else obj
    for item in objective_args:
        if "=" not in item:
            raise ConfigError(f"--objective-arg {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        obj[k.strip()] = _parse_value(v)
    train["objective"] = obj
    if every:
        train["every"] = every
    TrainSettings.from_dict(train)
    mutation = [dict(m) for m in config.mutation] if any(m.get("type") == "policy" for m in config.mutation) \
        else [{"type": "policy", "weight": 1.0, **dict(train.get("operator") or {})}]
    backend = {"type": "transformers", "policy": train.get("policy", "tiny")}
    return config.with_overrides(train=train, mutation=mutation, backend=backend)


class _LockedBackend:
    """The shared backend behind a lock, so a trainer step never races a generation."""

    def __init__(self, inner: Any, lock: asyncio.Lock | None = None) -> None:
        self.inner = inner
        self.lock = lock

    async def generate(self, requests: list[Any]) -> list[list[Any]]:
        if self.lock is None:
            self.lock = asyncio.Lock()
        async with self.lock:
            return await self.inner.generate(requests)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class JoinedEvolution(Evolution):
    """:class:`Evolution` whose ``policy`` mutations train the policy that makes them."""

    def __init__(self, store: Any, run_id: str, example: Any, config: RunConfig, **kw: Any) -> None:
        self.train_settings = TrainSettings.from_dict(config.train)
        if config.max_pending is None:
            # Few parent prompts in flight: enough to keep the sandbox workers busy, few enough
            # that trainer steps land between generations (on-policy rollouts, fresh versions).
            per_job = max(1, config.children_per_parent)
            config = config.with_overrides(max_pending=-(-max(1, config.workers) // per_job) + 1)
        self.trainer = self._load_trainer(store, run_id)
        self.clusterer = registry.cluster.create(self.train_settings.cluster)
        super().__init__(store, run_id, example, config, **kw)
        state = store.get_state(run_id, "joined") or {}
        self.last_seq = int(state.get("last_seq", 0))
        self.evals_since_step = 0
        self.train_log: list[dict[str, Any]] = []
        self._fix_missing_rewards()

    # -- policy and trainer --------------------------------------------------------------
    def _base_model(self) -> tuple[Any, Any]:
        spec = self.train_settings.policy
        if spec == "tiny":
            from qdevolve.rl.tiny import load_tiny_policy

            return load_tiny_policy(self.train_settings.task)
        path = spec.split(":", 1)[1] if spec.startswith("vllm:") else spec
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise ConfigError(f"--policy {spec}: needs the 'rl' extra (pip install 'qdevolve[rl]'): {exc}") from None
        try:
            tok = AutoTokenizer.from_pretrained(path)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        except OSError as exc:
            raise ConfigError(f"--policy {spec}: not a Hugging Face model directory ({exc})") from None
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        return model, tok

    def _load_trainer(self, store: Any, run_id: str) -> Any:
        from qdevolve.rl.config import TrainerConfig
        from qdevolve.rl.trainer import PolicyTrainer

        objective = registry.objective.create(self.train_settings.objective)
        objective.name = self.train_settings.objective["type"]
        try:
            tconf = TrainerConfig(**self.train_settings.trainer)
        except TypeError as exc:
            raise ConfigError(f"train.trainer: {exc}") from None
        if store.policy_versions(run_id):
            return PolicyTrainer.from_store(store, run_id, objective, tconf)
        model, tok = self._base_model()
        trainer = PolicyTrainer(model, tok, objective, tconf, store=store, run_id=run_id)
        trainer.save_version(metrics={"base": True, "objective": objective.name})
        return trainer

    def _make_backend(self, config: RunConfig) -> Any:
        spec = self.train_settings.policy
        if spec.startswith("vllm:"):
            backend = registry.backend.create({"type": "vllm", "model": spec.split(":", 1)[1],
                                               **self.train_settings.backend})
            backend.load_policy(self.trainer.version, self.store_path_of_version(self.trainer.version))
        else:
            backend = registry.backend.create({"type": "transformers", "model": self.trainer.model,
                                               "tokenizer": self.trainer.tokenizer, **self.train_settings.backend})
            backend.policy_version = self.trainer.version
        return _LockedBackend(backend)

    def store_path_of_version(self, version: int) -> str | None:
        rows = self.store.policy_versions(self.run_id)
        return next((r["path"] for r in rows if r["version"] == version), None)

    # -- rewards -------------------------------------------------------------------------
    def _reward(self, program: Program, result: EvalResult) -> float:
        s = self.train_settings
        if result.status != "ok" or result.score is None or not math.isfinite(result.score):
            return s.invalid_reward
        if s.reward == "improvement" and program.parent_ids:
            parent = self._lookup(program.parent_ids[0])[1]
            return float(result.score - (parent.score or 0.0))
        if s.reward == "tests" and result.tests:
            return float(sum(result.tests) / len(result.tests))
        return float(result.score)

    def rollout_reward(self, program: Program, result: EvalResult,
                       events: list[Any]) -> tuple[float | None, list[float] | None, str | None]:
        cell = next((e.cell for e in events if e.cell), None)
        if result.tests:
            self._n_tests = len(result.tests)
            vector = [float(t) for t in result.tests]
        else:  # failed programs score every test as the gated reward, so vectors line up
            vector = [self._reward(program, result)] * getattr(self, "_n_tests", 1)
        meta: dict[str, Any] = {"program_id": program.id, "tests": result.tests,
                                "score": None if result.score is None else round(result.score, 9),
                                "status": result.status}
        if cell is not None:
            meta["archive_cell"] = cell
        text = program.metadata.get("completion") or program.code
        key = str(self.clusterer((text, meta)))
        return self._reward(program, result), vector, key

    def _fix_missing_rewards(self) -> None:
        """After a kill between an evaluation and its reward row: recompute from the store."""
        fixes = []
        for _seq, r in self.store.rollouts(self.run_id, after_seq=self.last_seq):
            if r.reward is None and r.program_id:
                res = self.store.get_evaluation(r.program_id)
                if res is not None:
                    prog = self.store.get_program(r.program_id)
                    fixes.append((r.id, *self.rollout_reward(prog, res, [])))
        if fixes:
            self.store.set_rollout_rewards(fixes)

    # -- training ------------------------------------------------------------------------
    async def after_job(self, candidates: list[Candidate]) -> None:
        self.evals_since_step += len(candidates)
        if self.evals_since_step >= self.train_settings.every:
            await self.train_step()

    def _complete_groups(self) -> tuple[list[Any], int]:
        from qdevolve.rl.group import RolloutGroup

        rows = self.store.rollouts(self.run_id, after_seq=self.last_seq)
        by_group: dict[str, list[tuple[int, Any]]] = {}
        for seq, r in rows:
            by_group.setdefault(r.group_id or r.id, []).append((seq, r))
        groups, last = [], self.last_seq
        pending_min = None
        for members in by_group.values():
            if any(r.reward is None for _, r in members):
                first = min(seq for seq, _ in members)
                pending_min = first if pending_min is None else min(pending_min, first)
                continue
            rs = [r for _, r in members if r.token_ids]
            lengths = {len(r.reward_vector) for r in rs if r.reward_vector is not None}
            if len(lengths) > 1:  # e.g. rewarded before the first per-test vector was seen
                width = max(lengths)
                for r in rs:
                    if r.reward_vector is not None and len(r.reward_vector) != width:
                        r.reward_vector = [float(r.reward or 0.0)] * width
            if len(rs) >= 2:
                g = RolloutGroup.from_rollouts(rs, outcome=self._outcome_key)
                if ("candidate_vectors" in getattr(self.trainer.objective, "requires", ())
                        and g.candidate_vectors is None and g.reward_vectors is not None):
                    # one program per completion: a set of m = 1 candidates (VPO with m = 1)
                    g.candidate_vectors = np.asarray(g.reward_vectors, dtype=float)[:, None, :]
                g.metadata["prompt_token_ids"] = list(rs[0].prompt_token_ids)
                groups.append(g)
            last = max(last, max(seq for seq, _ in members))
        if pending_min is not None:
            last = min(last, pending_min - 1)
        return groups, last

    def _outcome_key(self, r: Any) -> str:
        """IPS's outcome identity: the completion text, or its behaviour (tests and reward)."""
        if self.train_settings.outcome == "behaviour":
            return f"{r.reward_vector}|{r.reward}"
        return r.completion.strip()

    async def train_step(self) -> dict[str, Any] | None:
        groups, last = self._complete_groups()
        if not groups:
            return None
        lock = self.backend.lock or asyncio.Lock()
        self.backend.lock = lock
        loop = asyncio.get_running_loop()
        async with lock:
            t0 = time.perf_counter()
            metrics = await loop.run_in_executor(None, self.trainer.step, groups)
            metrics = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
            metrics["step_seconds"] = time.perf_counter() - t0
            metrics.update(self._diversity(groups))
            metrics["groups"] = len(groups)
            version = await loop.run_in_executor(None, lambda: self.trainer.save_version(metrics=metrics))
            inner = self.backend.inner
            if getattr(inner, "model", None) is self.trainer.model:
                inner.policy_version = version
            else:
                inner.load_policy(version, self.store_path_of_version(version))
        self.last_seq = max(self.last_seq, last)
        self.store.set_state(self.run_id, "joined", {"last_seq": self.last_seq, "version": version})
        self.evals_since_step = 0
        self.train_log.append({"version": version, **metrics})
        return metrics

    def _diversity(self, groups: list[Any]) -> dict[str, float]:
        import numpy as np

        texts, correct = [], set()
        for g in groups:
            keys = g.outcome_keys if g.outcome_keys is not None else [None] * g.size
            for i in range(g.size):
                key = keys[i] if keys[i] is not None else str(g.cluster_keys[i]) if g.cluster_keys is not None else i
                texts.append(key)
                if float(g.rewards[i]) >= self.train_settings.correct_threshold:
                    correct.add(key)
        rewards = np.concatenate([np.asarray(g.rewards, dtype=float) for g in groups])
        return {"D_n": float(len(correct)), "mean_reward": float(rewards.mean()),
                "distinct_clusters": float(len({str(k) for g in groups for k in (g.cluster_keys or [])}))}
