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
* ``improvement_clipped``: ``clip(score - parent score, 0, c) / c`` with ``c =
  improvement_clip`` (default 1; :func:`qdevolve.rl.shaping.clipped_improvement`): only a
  child better than its parent pays, at most 1;
* ``tests``: the mean of the per-test vector (falls back to the score);
* ``binary``: ``1.0`` if the score is ``>= correct_threshold`` (default 1.0), else ``0.0``
  (the counting objectives, IPS/pass@k, want binary outcomes).

Then the optional shaping (``train.shaping``, :mod:`qdevolve.rl.shaping`, off by default):
``reward = shaping(reward, child_kind(...))`` with the child's code (``None`` for a failed
mutation), its parents' code, the code hashes stored before it and its status, so a lazy,
duplicate or failed child earns its configured reward in place of the base one; with a
``same_class`` value, an ``ok`` child whose cluster key equals that of a program stored
before it (within its ``solved_by`` problem) is of kind ``same_class`` (the keys of the stored
programs are read from the store once, then kept as children are stored). A copy of its
parent or of a stored program is not evaluated again, but its rollout is stored and rewarded
(:meth:`JoinedListener.duplicate_reward`: the copied program's reward, then the shaping) and
trained on with its group. ``max_samples`` stops the run once that many rollouts (copies
included) are rewarded. The ``es`` objective trains by :class:`~qdevolve.rl.es.GroupES`: one
perturbed policy per group, an update per population.

The per-test vector (or ``[reward]``) is the reward vector (VPO). Cluster keys
(``train.cluster``) come from a ``cluster`` plugin, computed whether or not the archive
admits the child: ``feature_cell`` (the child's own descriptor cell, from
``EvalResult.features``), ``semantic`` (its outputs on probe inputs: ``outputs`` recorded by
the evaluator in ``artifacts["outputs"]``, or a ``probe`` of its ``code``), ``ast_hash`` (its
normalised syntax tree), ``outcome`` (hash of the per-test vector and score), or
``archive_cell`` (the default: the niche the child landed in; children not admitted share
``cell:none``), or any registered clusterer. The clusterer sees ``(completion, metadata)``
with ``metadata`` holding ``code``, ``features``, ``outputs`` (when recorded), ``tests``,
``score``, ``status``, ``program_id`` and ``archive_cell`` (when admitted).

The loop is the plain engine with a :class:`JoinedListener` (a
:class:`~qdevolve.evolve.training.listener.TrainingListener`, not an engine subclass): the engine
writes each rollout with the reward the listener computes in the same transaction as the
child's evaluation, and calls :meth:`JoinedListener.after_job` after each parent prompt.
``group_size`` (default: ``run.children_per_parent``) is how many children of one parent
and one prompt form one group (ThetaEvolve samples 16, TTT-Discover 64).

``train`` settings and the ``--policy``/``--train-*`` flags: :mod:`qdevolve.evolve.training.settings`.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from qdevolve import registry
from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError
from qdevolve.evolve.setup import RunConfig, policy_path
from qdevolve.evolve.training.joined_backend import LockedBackend, StoredBefore
from qdevolve.evolve.training.listener import Reward
from qdevolve.evolve.training.settings import REWARDS, TrainSettings, apply_policy_options
from qdevolve.types import ArchiveEvent, EvalResult, Program

__all__ = ["JoinedListener", "REWARDS", "TrainSettings", "apply_policy_options"]  # the last three re-exported

class JoinedListener:
    """Trains the policy behind the ``policy`` operator while the engine evolves (module docstring).

    Args:
        store: The run's database (policy versions and rollouts).
        run_id: The run.
        config: The run config; its ``train`` section is read as :class:`TrainSettings`.
    """

    samples = 0  # rollouts rewarded this session, copies included (train.max_samples)
    stop_reason: str | None = None  # set once train.max_samples is reached; the engine stops the run
    es: Any = None  # a GroupES when the objective is 'es'

    def __init__(self, store: LineageStore, run_id: str, config: RunConfig) -> None:
        from qdevolve.evolve.training.training_groups import GroupCollector

        self.settings = TrainSettings.from_dict(config.train)
        self.store, self.run_id = store, run_id
        self.trainer = self._load_trainer()
        self.clusterer = registry.cluster.create(self.settings.cluster)
        from qdevolve.rl.shaping import RewardShaping

        self.shaping = RewardShaping.from_dict(self.settings.shaping, "train.shaping")
        self.backend = self._make_backend()
        self.group_size: int | None = self.settings.group_size
        per_job = self.group_size or max(1, config.children_per_parent)
        # Few parent prompts in flight: enough to keep the workers busy, few enough that trainer
        # steps land between generations (on-policy rollouts, fresh versions).
        self.max_pending: int | None = -(-max(1, config.workers) // per_job) + 1
        state = store.get_state(run_id, "joined") or {}
        self.groups = GroupCollector(store, run_id, self.settings, self.trainer.objective,
                                     last_seq=int(state.get("last_seq", 0)), done=state.get("done") or ())
        self.n_tests = 1  # width of the reward vector: the number of tests, once a result has them
        self.evals_since_step = 0
        self.train_log: list[dict[str, Any]] = []
        self.solved: set[Any] = set()  # train.solved_by: problems with a correct program so far
        self._solved_pending: dict[str, Any] = {}  # program id -> problem, until the engine stores it
        self._class_pending: dict[str, tuple[Any, str]] = {}  # program id -> class (same_class), until stored
        self._classes: set[tuple[Any, str]] | None = None  # stored classes, read on first use
        self.samples = 0  # rollouts rewarded this session, copies included (train.max_samples)
        self.stop_reason: str | None = None
        self.es = None
        if self.trainer.es is not None:  # a parameter-space objective: one group per ES member
            from qdevolve.rl.es import GroupES

            self.es = GroupES(self.trainer.es.objective, self.trainer.model, missing=self.settings.invalid_reward)
            self.backend.es = self.es

    # -- policy and trainer --------------------------------------------------------------
    def _base_model(self) -> tuple[Any, Any]:
        from qdevolve.backends.transformers_backend import quiet_transformers

        quiet_transformers()  # no "Loading weights" bars or advisory warnings in the user's terminal
        spec = self.settings.policy
        path = policy_path(spec)
        if path is None:  # the built-in tiny base, built once per task and base seed, then cached
            from qdevolve.rl.tiny import load_tiny_policy

            return load_tiny_policy(self.settings.task, seed=self.settings.base_seed)
        from qdevolve.backends.models import offline_hub, resolve_model

        path = str(resolve_model(spec.split(":", 1)[1] if spec.startswith("vllm:") else spec))
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise ConfigError(f"--policy {spec}: needs the 'rl' extra (pip install 'qdevolve[rl]'): {exc}") from None
        from qdevolve.progress import phase

        try:
            with offline_hub(), phase(f"loading the policy model {path}"):
                tok = AutoTokenizer.from_pretrained(path)
                model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        except OSError as exc:
            raise ConfigError(f"--policy {spec}: not a Hugging Face model directory ({exc})") from None
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        return model, tok

    def _load_trainer(self) -> Any:
        from qdevolve.backends.transformers_backend import quiet_transformers
        from qdevolve.rl.config import TrainerConfig
        from qdevolve.rl.trainer import PolicyTrainer

        quiet_transformers()  # a resumed run loads its latest version with from_pretrained

        objective = registry.objective.create(self.settings.objective)
        objective.name = self.settings.objective["type"]
        try:
            tconf = TrainerConfig(**self.settings.trainer)
        except TypeError as exc:
            raise ConfigError(f"train.trainer: {exc}") from None
        if self.store.policy_versions(self.run_id):
            return PolicyTrainer.from_store(self.store, self.run_id, objective, tconf)
        model, tok = self._base_model()
        trainer = PolicyTrainer(model, tok, objective, tconf, store=self.store, run_id=self.run_id)
        trainer.save_version(metrics={"base": True, "objective": objective.name})
        return trainer

    def _make_backend(self) -> LockedBackend:
        spec = self.settings.policy
        if self.settings.backend.get("placement") == "ray":  # a policy actor shared by controllers
            from qdevolve.backends.ray_policy import joined_backend

            return LockedBackend(joined_backend(self, spec))
        if spec.startswith("vllm:"):
            backend = registry.backend.create({"type": "vllm", "model": spec.split(":", 1)[1],
                                               **self.settings.backend})
            backend.load_policy(self.trainer.version, self._path_of(self.trainer.version))
        else:
            backend = registry.backend.create({"type": "transformers", "model": self.trainer.model,
                                               "tokenizer": self.trainer.tokenizer, **self.settings.backend})
            backend.policy_version = self.trainer.version
        return LockedBackend(backend)

    def _path_of(self, version: int) -> str | None:
        rows = self.store.policy_versions(self.run_id)
        return next((r["path"] for r in rows if r["version"] == version), None)

    # -- rewards -------------------------------------------------------------------------
    def _scalar(self, program: Program, result: EvalResult, parent: EvalResult | None) -> float:
        s = self.settings
        if result.status != "ok" or result.score is None or not math.isfinite(result.score):
            return s.invalid_reward
        if s.reward == "binary":
            return 1.0 if result.score >= s.correct_threshold else 0.0
        if s.reward == "improvement" and parent is not None:
            return float(result.score - (parent.score or 0.0))
        if s.reward == "improvement_clipped":
            from qdevolve.rl.shaping import clipped_improvement

            return clipped_improvement(result.score, None if parent is None else parent.score, s.improvement_clip)
        if s.reward == "tests" and result.tests:
            return float(sum(result.tests) / len(result.tests))
        return float(result.score)

    def child_kind(self, program: Program, result: EvalResult, class_key: tuple[Any, str] | None = None) -> str:
        """The shaping kind of ``program`` (:func:`qdevolve.rl.shaping.child_kind`): its code
        against its parents' code and the programs the run stored before it; ``same_class``
        when it is new text but ``class_key`` (:meth:`class_of`) is among the stored classes."""
        from qdevolve.rl.shaping import child_kind

        failed = bool(program.metadata.get("failed_mutation"))
        code = None if failed else program.code
        parents = [self.store.get_program(pid).code for pid in program.parent_ids] if code else []
        kind = child_kind(code=code, parent_codes=parents, stored_hashes=StoredBefore(self.store, self.run_id, program),  # type: ignore[arg-type]
                          status=result.status)
        if kind == "ok" and class_key is not None and "same_class" in self.shaping.values \
                and class_key in self.stored_classes():
            return "same_class"
        return kind

    def class_of(self, program: Program, result: EvalResult, key: str | None) -> tuple[Any, str] | None:
        """``(problem, cluster key)`` of an ``ok`` program (the problem: its ``solved_by``
        feature, else ``None``), or ``None`` when it has no class (not ``ok``, a ``...:none`` key)."""
        if result.status != "ok" or not key or key.endswith(":none"):
            return None
        problem = result.features.get(self.settings.solved_by) if self.settings.solved_by else None
        return (problem, key)

    def stored_classes(self) -> set[tuple[Any, str]]:
        """The classes of the programs the run has stored (``same_class``): read from the store
        on first use (seeds and children, as the clusterer sees them now), then kept by
        :meth:`count_reward` as each rewarded child is stored."""
        if getattr(self, "_classes", None) is None:
            classes: set[tuple[Any, str]] = set()
            for _seq, prog, res in self.store.iter_evaluated(self.run_id):
                text = prog.metadata.get("completion") or prog.code
                c = self.class_of(prog, res, self.cluster_key(prog, res, [], text))
                if c is not None:
                    classes.add(c)
            self._classes = classes
        return self._classes

    def reward(self, program: Program, result: EvalResult, events: list[ArchiveEvent],
               parent: EvalResult | None) -> Reward:
        """Gated, shaped reward, per-test vector and cluster key of the rollout behind ``program``."""
        scalar = self._scalar(program, result, parent)
        text = program.metadata.get("completion") or program.code
        key = self.cluster_key(program, result, events, text)
        cls = self.class_of(program, result, key)
        if self.shaping.enabled:
            scalar = self.shaping(scalar, self.child_kind(program, result, cls))
        if result.tests:
            self.n_tests = len(result.tests)
            vector = [float(t) for t in result.tests]
        else:  # failed programs score every test as the gated reward, so vectors line up
            vector = [scalar] * self.n_tests
        self._note_solved(program, result)
        if cls is not None and "same_class" in self.shaping.values:
            self._class_pending[program.id] = cls
        return Reward(scalar, vector, key)

    def _note_solved(self, program: Program, result: EvalResult) -> None:
        """``train.solved_by``: the problem of a correct program, counted as solved once the
        engine has stored the program (:meth:`count_reward`)."""
        key = self.settings.solved_by
        if key and result.status == "ok" and result.score is not None \
                and result.score >= self.settings.correct_threshold and key in result.features:
            self._solved_pending[program.id] = result.features[key]

    def duplicate_reward(self, program: Program, original: Program, result: EvalResult) -> Reward:
        """The reward of a copy the engine does not store: the copied program's reward, shaped
        as ``lazy`` (equal to its parent) or ``duplicate`` (equal to a stored program)."""
        parent = self.store.get_evaluation(program.parent_ids[0]) if program.parent_ids else None
        scalar = self._scalar(original, result, parent)
        if self.shaping.enabled:
            scalar = self.shaping(scalar, self.child_kind(program, result))
        vector = [float(t) for t in result.tests] if result.tests else [scalar] * self.n_tests
        text = program.metadata.get("completion") or program.code
        return Reward(scalar, vector, self.cluster_key(original, result, [], text))

    def count_reward(self, program: Program, reward: Reward) -> None:
        """One more sample, stored with ``reward``: the sample budget, and the fitness of its
        ES member (called by the engine after the commit)."""
        scalar = reward.reward if reward.reward is not None else self.settings.invalid_reward
        self.samples += 1
        solved = self._solved_pending.pop(program.id, None)
        if solved is not None:
            self.solved.add(solved)
        cls = getattr(self, "_class_pending", {}).pop(program.id, None)
        if cls is not None:
            self.stored_classes().add(cls)
        limit = self.settings.max_samples
        if limit is not None and self.samples >= int(limit) and self.stop_reason is None:
            self.stop_reason = f"train.max_samples: {self.samples} samples drawn"
        member = (program.metadata.get("usage") or {}).get("es_member")
        if self.es is not None and isinstance(member, int):
            self.es.record(member, scalar)

    def cluster_key(self, program: Program, result: EvalResult, events: list[ArchiveEvent], text: str) -> str:
        """The strategy key of the child, admitted by the archive or not (module docstring)."""
        meta: dict[str, Any] = {"program_id": program.id, "tests": result.tests,
                                "score": None if result.score is None else round(result.score, 9),
                                "status": result.status, "features": dict(result.features)}
        if program.code and not program.metadata.get("failed_mutation"):
            meta["code"] = program.code
        if result.artifacts.get("outputs") is not None:
            meta["outputs"] = result.artifacts["outputs"]
        cell = next((e.cell for e in events if e.cell), None)
        if cell is not None:
            meta["archive_cell"] = cell
        return str(self.clusterer((text, meta)))

    # -- training ------------------------------------------------------------------------
    async def after_job(self, programs: list[Program]) -> None:
        self.evals_since_step += len(programs)
        if not self.settings.enabled:  # the control: rollouts stored and rewarded, never trained on
            return
        if self.es is not None:  # ES steps once every member's group is rewarded, not every N evaluations
            self.es.finish()
            if self.es.ready:
                await self.es_step()
        elif self.evals_since_step >= self.settings.every:
            await self.train_step()

    async def es_step(self) -> dict[str, Any]:
        """The ES update over this iteration's groups (:class:`~qdevolve.rl.es.GroupES`); a new version."""
        loop = asyncio.get_running_loop()
        try:
            async with self.backend.exclusive():
                t0 = time.perf_counter()
                metrics = self.es.update()
                metrics["step_seconds"] = time.perf_counter() - t0
                if self.settings.solved_by:
                    metrics["targets_solved"] = float(len(self.solved))
                self.trainer.global_step += 1
                self.trainer.es.global_step = self.trainer.global_step
                version = await loop.run_in_executor(None, lambda: self.trainer.save_version(metrics=metrics))
                self.backend.inner.policy_version = version
        finally:
            self.backend.release()  # waiting generations go on (with the new weights, or to fail)
        self.evals_since_step = 0
        self.train_log.append({"version": version, **metrics})
        return metrics

    async def train_step(self) -> dict[str, Any] | None:
        """One trainer step on the groups completed since the last one; a new policy version.

        The groups are collected under the backend's lock, and ``last_seq`` moves on before
        the lock is released: two steps due at once (several prompts in flight) train on
        disjoint groups, never twice on the same rollouts with stale log-probabilities."""
        loop = asyncio.get_running_loop()
        async with self.backend.exclusive():
            groups, last = self.groups.complete()
            if not groups:
                return None
            t0 = time.perf_counter()
            metrics = await loop.run_in_executor(None, self.trainer.step, groups)
            metrics = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
            metrics["step_seconds"] = time.perf_counter() - t0
            metrics.update(self.groups.diversity(groups))
            metrics["groups"] = len(groups)
            if self.settings.solved_by:
                metrics["targets_solved"] = float(len(self.solved))
            version = await loop.run_in_executor(None, lambda: self.trainer.save_version(
                metrics=metrics, extra_state={"joined": self.groups.state(last)}))
            inner = self.backend.inner
            if getattr(inner, "model", None) is self.trainer.model:  # in-process weights: already current
                inner.policy_version = version
            else:
                inner.load_policy(version, self._path_of(version))
            self.groups.advance(last)
        self.evals_since_step = 0
        self.train_log.append({"version": version, **metrics})
        return metrics

    def close(self) -> None:
        """Nothing to release beyond the backend, which the engine closes."""
