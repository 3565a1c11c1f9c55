"""The shared vocabulary: :class:`Program`, :class:`EvalResult`, :class:`Rollout`.

Every room of qdevolve (store, sandbox, archives, mutations, the RL trainer) speaks in
these three types; see ``docs/engine.md``. This module imports nothing else from qdevolve
but :mod:`qdevolve.programtree` (a program of several files; it imports nothing from qdevolve).
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from qdevolve.programtree import TreeError, is_tree, parse_tree

__all__ = [
    "STATUSES",
    "EDGE_ROLES",
    "Status",
    "EdgeRole",
    "Program",
    "PromptTemplate",
    "EvalResult",
    "Rollout",
    "ArchiveEvent",
    "Elite",
    "EVENT_KINDS",
    "new_id",
    "code_hash",
    "normalize_code",
    "HELDOUT_PREFIX",
    "task_scores",
]

Status = Literal["ok", "error", "timeout", "memory", "killed", "invalid"]
STATUSES: tuple[str, ...] = ("ok", "error", "timeout", "memory", "killed", "invalid")

EdgeRole = Literal["mutation", "crossover", "migration", "inspiration"]
EDGE_ROLES: tuple[str, ...] = ("mutation", "crossover", "migration", "inspiration")

_COMMENT = re.compile(r"(?m)#(?![^\n]*EVOLVE-BLOCK).*$")
_TRAILING_WS = re.compile(r"[ \t]+$", re.MULTILINE)
_BLANK_LINES = re.compile(r"\n\s*\n+")


def new_id() -> str:
    """A fresh program / rollout id (32 hex characters)."""
    return uuid.uuid4().hex


def normalize_code(code: str) -> str:
    """Code with comments, trailing whitespace and blank lines removed (for de-duplication)."""
    code = _COMMENT.sub("", code.replace("\r\n", "\n"))
    code = _TRAILING_WS.sub("", code)
    return _BLANK_LINES.sub("\n", code).strip() + "\n"


def code_hash(code: str) -> str:
    """SHA-256 of :func:`normalize_code` (hex, first 32 characters); for a program tree
    (:mod:`qdevolve.programtree`) of its main path and every ``path\0normalised text``."""
    if is_tree(code):
        try:
            tree = parse_tree(code)
        except TreeError:
            pass  # a malformed tree is hashed as text
        else:
            parts = [tree.main] + [f"{p}\0{normalize_code(t)}" for p, t in tree.files.items()]
            return hashlib.sha256("\0\0".join(parts).encode("utf-8")).hexdigest()[:32]
    return hashlib.sha256(normalize_code(code).encode("utf-8")).hexdigest()[:32]


@dataclass
class Program:
    """One candidate program in a run's lineage.

    Attributes:
        id: Unique id (hex).
        run_id: The run that owns the program.
        code: Full source text.
        language: Source language (``"python"``).
        parent_ids: Parents in order (empty for the seed; two for crossover).
        generation: 0 for the seed, else 1 + the largest parent generation.
        island: Island index (0 without islands).
        operator: Mutation operator that produced it (``"seed"`` for the seed).
        prompt_hash: Hash of the prompt that produced it, when a model did.
        policy_version: Policy version of the model that produced it (``None`` = not a policy).
        created_at: Unix time.
        code_hash: Hash of the normalised code, for de-duplication.
        metadata: Free-form JSON-serialisable extras (e.g. failed-mutation reasons).
    """

    code: str
    run_id: str = ""
    id: str = field(default_factory=new_id)
    language: str = "python"
    parent_ids: tuple[str, ...] = ()
    generation: int = 0
    island: int = 0
    operator: str = "seed"
    prompt_hash: str | None = None
    policy_version: int | None = None
    created_at: float = field(default_factory=time.time)
    code_hash: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.parent_ids = tuple(self.parent_ids)
        if not self.code_hash:
            self.code_hash = code_hash(self.code)


@dataclass
class EvalResult:
    """What a sandboxed evaluation of one program produced.

    Attributes:
        status: ``ok``, ``error``, ``timeout``, ``memory``, ``killed`` or ``invalid``.
        score: The scalar fitness (OpenEvolve's ``combined_score``); ``None`` unless ``ok``.
        metrics: Other numeric metrics.
        tests: Optional per-test-case results in [0, 1] (the VPO reward vector).
        objectives: Named objective values for Pareto archives (their directions come from
            the run's ``objectives`` config); empty when the values are read from ``metrics``
            of the same names, as an evaluator's returned dict gives them.
        features: Behaviour descriptors for the archive.
        artifacts: Text fed back into prompts (stderr, tracebacks, evaluator feedback).
        error: One-line reason when ``status != "ok"``.
        runtime_s: Wall time of the evaluation.
        peak_memory_mb: Peak resident memory of the sandbox, when known.
    """

    status: Status = "ok"
    score: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    tests: list[float] | None = None
    features: dict[str, float] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    runtime_s: float = 0.0
    peak_memory_mb: float | None = None
    objectives: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"EvalResult.status must be one of {STATUSES}, got {self.status!r}")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "score": self.score,
            "metrics": dict(self.metrics),
            "tests": None if self.tests is None else list(self.tests),
            "features": dict(self.features),
            "artifacts": dict(self.artifacts),
            "error": self.error,
            "runtime_s": self.runtime_s,
            "peak_memory_mb": self.peak_memory_mb,
            "objectives": dict(self.objectives),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalResult:
        return cls(
            status=d.get("status", "ok"),
            score=d.get("score"),
            metrics=dict(d.get("metrics") or {}),
            tests=None if d.get("tests") is None else list(d["tests"]),
            features=dict(d.get("features") or {}),
            artifacts=dict(d.get("artifacts") or {}),
            error=d.get("error"),
            runtime_s=float(d.get("runtime_s") or 0.0),
            peak_memory_mb=d.get("peak_memory_mb"),
            objectives=dict(d.get("objectives") or {}),
        )


@dataclass
class Rollout:
    """One model completion: a mutation is a rollout, its sandbox result is the reward.

    Attributes:
        prompt: The prompt text (chat messages rendered to text).
        completion: The generated text.
        token_ids: Completion token ids (empty when the backend cannot give them).
        logprobs: Per-token log-probabilities under the policy that sampled them.
        policy_version: Policy version that sampled the completion.
        program_id: The program this completion produced (``None`` if parsing failed).
        reward: Scalar reward once evaluated.
        reward_vector: Per-test reward vector once evaluated.
        cluster_key: Strategy key (archive cell, outcome hash, ...) for ``ips``/``rare``.
        group_id: Rollouts sharing a prompt share a group id (GRPO groups).
        prompt_token_ids: Prompt token ids, when known.
        finish_reason: ``stop``, ``length``, ...
        prompt_tokens / completion_tokens: Token usage.
        metadata: Extras (task name, outcome key, ...).
    """

    prompt: str
    completion: str
    run_id: str = ""
    id: str = field(default_factory=new_id)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    policy_version: int | None = None
    program_id: str | None = None
    reward: float | None = None
    reward_vector: list[float] | None = None
    cluster_key: str | None = None
    group_id: str | None = None
    prompt_token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    created_at: float = field(default_factory=time.time)
    metadata: dict[str, Any] = field(default_factory=dict)


EVENT_KINDS: tuple[str, ...] = ("added", "improved", "replaced", "migrated", "removed")


@dataclass
class ArchiveEvent:
    """What an archive did with a program (pyribs' add-status, as a stored event).

    Attributes:
        program_id: The program inserted (or removed).
        kind: ``added`` (new cell / niche), ``improved`` (beat the cell's elite),
            ``replaced`` (took a slot without improving, e.g. novelty or DGM bookkeeping),
            ``migrated`` (copied to another island), ``removed`` (evicted).
        archive: Archive name (``map_elites``, ``islands``, ...).
        island: Island index (0 without islands).
        cell: The niche key as a string (grid index ``"3,7"``, centroid id, ...).
        replaced_id: The elite it displaced, if any.
        score: The program's score.
        data: Extra JSON-serialisable data needed to rebuild the archive.
    """

    program_id: str
    kind: str
    archive: str
    island: int = 0
    cell: str | None = None
    replaced_id: str | None = None
    score: float | None = None
    data: dict[str, Any] = field(default_factory=dict)
    run_id: str = ""
    created_at: float = field(default_factory=time.time)


@dataclass
class Elite:
    """A program as an archive holds it: id and what selection needs, never the code.

    Attributes:
        program_id: The program's id.
        score: Its fitness.
        features: Behaviour descriptors used for binning / novelty.
        cell: The niche key as a string.
        island: Island index.
        code_hash: Normalised-code hash (migration never copies code already present).
        generation: The program's generation.
        children: How many evaluated children it has (DGM selection).
        novelty: Novelty score, when the archive computes one.
        parent_id: The program's first parent (``None`` for a seed), on archives that track it.
        clade_successes: Successes summed over the program's clade (itself and every
            descendant the archive saw), on archives that keep clade statistics (``dgm``);
            ``None`` elsewhere. Read by ``hgm`` selection.
        clade_trials: Trials summed over the same clade (``None`` without clade statistics).
        objectives: The program's objective values, on archives with several objectives
            (``pareto``); empty elsewhere.
        rank: Non-domination rank over the archive (0 = on the front), on ``pareto``.
        crowding: Crowding distance within its rank (``inf`` at a front's ends), on ``pareto``.
    """

    program_id: str
    score: float
    features: dict[str, float] = field(default_factory=dict)
    cell: str | None = None
    island: int = 0
    code_hash: str = ""
    generation: int = 0
    children: int = 0
    novelty: float | None = None
    parent_id: str | None = None
    clade_successes: float | None = None
    clade_trials: int | None = None
    objectives: dict[str, float] = field(default_factory=dict)
    rank: int | None = None
    crowding: float | None = None


#: Prefix of the metrics that hold an agent's score on a held-out benchmark task
#: (``heldout/<task>``); every other metric of an agent is a scoring task's score.
HELDOUT_PREFIX = "heldout/"

_AGGREGATE_METRICS = frozenset({"combined_score"})


def task_scores(metrics: dict[str, Any], operator: str | None = None
                ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """An agent's per-task scores from its evaluation metrics: ``(scoring, held_out)``.

    Agents (programs of operator ``self``, or whose metrics name a ``heldout/<task>``) store
    one metric per benchmark task; held-out tasks carry the :data:`HELDOUT_PREFIX`, which is
    removed from their names here. ``combined_score`` (the run's scalar score) is not a task.
    Returns ``None`` for a program that is not an agent, whose metrics are plain metrics.
    """
    if not isinstance(metrics, dict):
        return None
    names = [k for k in metrics if isinstance(k, str)]
    if operator != "self" and not any(k.startswith(HELDOUT_PREFIX) for k in names):
        return None
    scoring = {k: metrics[k] for k in names if not k.startswith(HELDOUT_PREFIX) and k not in _AGGREGATE_METRICS}
    held = {k[len(HELDOUT_PREFIX):]: metrics[k] for k in names if k.startswith(HELDOUT_PREFIX)}
    return scoring, held


@dataclass
class PromptTemplate:
    """One prompt template of the second population (:mod:`qdevolve.prompts.evolution`),
    as stored in ``prompt_templates``.

    Attributes:
        id: Unique id.
        name: The template it replaces (``diff_user``...).
        text: The template text.
        parent_id: The template it was mutated from (``None`` for a seed).
        origin: ``seed`` or the name of the mutator that made it.
        status: ``active``, ``invalid`` (refused by :func:`validate_template`) or ``retired``.
        reason: Why it was refused.
        retires: The template this one pushed out of a full population.
        generation: 0 for a seed, else 1 + the parent's.
        metadata: Extras (usage of the meta-prompt, the edits made).
        created_at: Unix time.
    """

    id: str
    name: str
    text: str
    parent_id: str | None = None
    origin: str = "seed"
    status: str = "active"
    reason: str | None = None
    retires: str | None = None
    generation: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)
