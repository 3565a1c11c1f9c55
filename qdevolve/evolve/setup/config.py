"""Run configuration: native ``config.yaml`` sections and OpenEvolve's format, one dataclass.

Native layout (every section optional; every plugin slot is ``{type: NAME, ...kwargs}``)::

    run:        {iterations: 200, seed: 0, workers: 2, wall_time_s: null, max_pending: null,
                 children_per_parent: 1, max_duplicate_streak: 200, fail_fast_children: 5,
                 executor: local,
                 executor_options: {}}
    archive:    {type: map_elites, ...}
    selection:  {type: tournament, ...}
    mutation:   [{type: ast, weight: 1.0}, {type: diff, weight: 0.7}, ...]
    backend:    {type: openai, api_base: ..., model: ...}   # or null: offline operators only
    sandbox:    {type: auto | local | bwrap | docker, ...options}
    limits:     {wall_s: 30, cpu_s: 30, memory_mb: 1024, ...}
    evaluator:  {cascade_thresholds: [0.5, 0.75]}
    inspirations: {n_best: 2, n_diverse: 2}
    prompt:     {system_message: ..., ...}                   # handed to prompt builders
    novelty:    {threshold: 0.99, model_path: null}          # embedding novelty rejection
    budget:     {max_tokens: N, max_cost: USD, max_wall_time: s, prices: {model: {input, output}}}
    record:     {value: 2.9396, direction: max, source: ..., metric: null}  # best known; summary shows the gap
    objectives: {accuracy: max, length: min}                 # several objectives (metrics); a pareto archive
    train:      {...}                                        # the joined inner loop

An OpenEvolve ``config.yaml`` (top-level ``max_iterations``, ``llm``, ``database``,
``evaluator``, ``prompt``, ...) is recognised and mapped (see ``docs/openevolve.md``); keys
we do not support produce one warning listing them. Unknown native keys are errors naming
the file, the YAML path and the keys that exist.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from qdevolve.errors import ConfigError

__all__ = ["RunConfig", "load_config", "parse_config", "OPENEVOLVE_KEYS", "cli_fields"]

NATIVE_SECTIONS = ("run", "archive", "selection", "mutation", "backend", "sandbox", "limits",
                   "evaluator", "inspirations", "prompt", "train", "novelty", "budget", "record",
                   "objectives")
NOVELTY_KEYS = ("threshold", "model_path", "max_length")
OPENEVOLVE_KEYS = ("max_iterations", "checkpoint_interval", "log_level", "log_dir", "random_seed",
                   "language", "file_suffix", "diff_based_evolution", "max_code_length",
                   "diff_pattern", "early_stopping_patience", "convergence_threshold",
                   "early_stopping_metric", "max_tasks_per_child", "llm", "database",
                   "evolution_trace")
RUN_KEYS = ("iterations", "seed", "workers", "wall_time_s", "max_evaluations", "max_pending",
            "children_per_parent", "max_duplicate_streak", "fail_fast_children", "name", "executor", "executor_options", "budget_pool",
            "pool_migration")
LIMIT_KEYS = ("wall_s", "cpu_s", "memory_mb", "processes", "output_bytes", "file_size_bytes",
              "open_files", "network", "env", "env_allow", "tmpfs_mb")
EVALUATOR_KEYS = ("cascade_thresholds", "cascade_evaluation", "timeout")
INSPIRATION_KEYS = ("n_best", "n_diverse")


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Everything a run needs; stored in the run row so ``resume`` rebuilds the same run."""

    iterations: int = field(default=100, metadata={"help": "Child programs to evaluate (the budget; 0 evaluates the seed alone)."})
    seed: int = field(default=0, metadata={"help": "Random seed of parent selection and mutation."})
    workers: int = field(default=2, metadata={"help": "Sandbox evaluation workers."})
    wall_time_s: float | None = field(default=None, metadata={"help": "Stop after this many seconds.",
                                                                "flag": "--wall-time"})
    max_pending: int | None = field(default=None, metadata={"help": "Model requests (parent plans) in flight; bred children may wait for evaluation beyond this (default: workers, or 4x workers with a model backend); 1 keeps one plan in flight in all, so a seeded run makes the same choices when killed and resumed."})
    children_per_parent: int = field(default=1, metadata={"help": "Children sampled per parent prompt (the RL group size)."})
    max_duplicate_streak: int = field(default=200, metadata={"help": "Stop when this many consecutive children are duplicates."})
    fail_fast_children: int = field(default=5, metadata={"help": "Stop (exit 1) when each of the run's first N children failed for the same reason (0: never)."})
    name: str | None = field(default=None, metadata={"help": "Run name."})
    executor: str = field(default="local", metadata={
        "help": "Where evaluations run: 'local' (threads in the controller, one warm sandbox each) or an "
                "executor plugin such as 'ray'."})
    executor_options: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "Options of the executor plugin (e.g. a Ray address and per-task resources)."})
    budget_pool: str | None = field(default=None, metadata={
        "help": "Share the budget (--iterations, the pool's total) with every run of this database "
                "started with the same pool name (islands driven by several controllers)."})
    pool_migration: dict[str, Any] | None = field(default=None, metadata={
        "help": "Exchange elites with the other runs of the budget pool through the database: "
                "{interval: N, count: K} (qdevolve.archive.islands_pool)."})
    archive: dict[str, Any] = field(default_factory=lambda: {"type": "map_elites"}, metadata={
        "help": "Archive plugin: map_elites, islands, dgm, novelty, ...", "plugin": True})
    selection: dict[str, Any] = field(default_factory=lambda: {"type": "tournament"}, metadata={
        "help": "Parent selection plugin: tournament, dgm, power_law, ...", "plugin": True})
    mutation: list[dict[str, Any]] = field(default_factory=list, metadata={
        "help": "Mutation operator(s), comma-separated: ast, diff, rewrite, crossover.", "plugin": True})
    backend: dict[str, Any] | None = field(default=None, metadata={
        "help": "Generation backend: openai, transformers, vllm.", "plugin": True})
    sandbox: dict[str, Any] = field(default_factory=lambda: {"type": "auto"}, metadata={
        "help": "Sandbox backend: local, bwrap, docker or auto.", "plugin": True})
    limits: dict[str, Any] = field(default_factory=lambda: {"wall_s": 30.0})
    evaluator: dict[str, Any] = field(default_factory=dict)
    inspirations: dict[str, Any] = field(default_factory=lambda: {"n_best": 2, "n_diverse": 2})
    prompt: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] | None = None
    novelty: dict[str, Any] | None = field(default=None, metadata={"help": "Embedding novelty rejection: {threshold, model_path}."})
    budget: dict[str, Any] | None = field(default=None, metadata={"help": "Token / cost / wall-time budget: {max_tokens, max_cost, max_wall_time, prices}."})
    record: dict[str, Any] | None = None  # the best known value: {value, direction, source, metric}
    objectives: dict[str, str] | None = field(default=None, metadata={
        "help": "Several objectives, metrics of the evaluator: {name: max|min}; the pareto archive reads them."})
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)}
        d["warnings"] = list(self.warnings)
        return d

    def __post_init__(self) -> None:
        pool = self.budget_pool
        if pool is not None and (not isinstance(pool, str) or not _POOL.fullmatch(pool)):
            raise ConfigError(f"run.budget_pool: expected a name of 1-59 letters, digits, '.', '_' or '-', "
                              f"got {pool!r}")
        if self.pool_migration:
            from qdevolve.archive.islands_pool import parse_pool_migration

            parse_pool_migration(self.pool_migration, pool=None, need_pool=False)  # the pool may come from a flag

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        kw["warnings"] = tuple(kw.get("warnings", ()))
        return cls(**kw)

    def with_overrides(self, **overrides: Any) -> RunConfig:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


_POOL = re.compile(r"[A-Za-z0-9_.-]{1,59}")  # the counter's run_id is "pool:<name>" (64 characters)


def cli_fields() -> list[tuple[str, str, type, str, bool]]:
    """``(field, flag, type, help, is_plugin_slot)`` of every :class:`RunConfig` field that has
    a command-line option: scalar fields with help text, and plugin slots (given by name)."""
    out = []
    for f in fields(RunConfig):
        help_ = f.metadata.get("help")
        if not help_:
            continue
        plugin = bool(f.metadata.get("plugin"))
        # annotations are strings here: "int", "float | None", "dict[str, Any]"...
        kind = str if plugin else {"int": int, "float": float, "str": str}.get(str(f.type).split(" ")[0])
        if kind is None:  # mappings and lists: config.yaml only
            continue
        out.append((f.name, f.metadata.get("flag", "--" + f.name.replace("_", "-")), kind, help_, plugin))
    return out


def _unknown(where: str, path: str, got: dict[str, Any], known: tuple[str, ...]) -> None:
    bad = sorted(set(got) - set(known))
    if bad:
        raise ConfigError(
            f"{where}: unknown key{'s' if len(bad) > 1 else ''} {', '.join(repr(b) for b in bad)} "
            f"at '{path}'; {_hint(bad, known)}known keys: {', '.join(known)}")


def _hint(bad: list[str], known: tuple[str, ...]) -> str:
    from qdevolve.suggest import did_you_mean

    hint = did_you_mean(bad, known)
    return hint + " " if hint else ""


def _spec(where: str, path: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"type": value}
    if not isinstance(value, dict) or "type" not in value:
        raise ConfigError(f"{where}: '{path}' must be a plugin name or a mapping with a 'type' key, got {value!r}")
    return dict(value)


def _mapping(where: str, path: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: '{path}' must be a mapping, got {type(value).__name__}")
    return value


def parse_config(data: dict[str, Any] | None, *, where: str = "config") -> RunConfig:
    """Validate a loaded YAML mapping (native or OpenEvolve) into a :class:`RunConfig`."""
    data = _mapping(where, "<top level>", data)
    from qdevolve.evolve.compat import looks_like_shinka, map_shinka

    if any(k in data for k in OPENEVOLVE_KEYS) and not any(k in data for k in ("run", "archive", "mutation")):
        from qdevolve.evolve.compat import map_openevolve

        data = map_openevolve(data, where=where)
    elif looks_like_shinka(data) and not any(k in data for k in ("run", "archive", "mutation")):
        data = map_shinka(data, where=where)
    warnings = tuple(data.pop("_warnings", ()))
    _unknown(where, "<top level>", data, NATIVE_SECTIONS)
    kw: dict[str, Any] = {"warnings": warnings}
    run = _mapping(where, "run", data.get("run"))
    _unknown(where, "run", run, RUN_KEYS)
    for key in RUN_KEYS:
        if key in run and run[key] is not None:
            kw[key] = run[key]
    for key in ("iterations", "workers", "children_per_parent", "max_duplicate_streak", "fail_fast_children"):
        if key in kw:
            try:
                kw[key] = int(kw[key])
            except (TypeError, ValueError, OverflowError):
                raise ConfigError(f"{where}: 'run.{key}' must be an integer, got {kw[key]!r}") from None
            if kw[key] < (0 if key in ("iterations", "fail_fast_children") else 1):
                raise ConfigError(f"{where}: 'run.{key}' must be positive, got {kw[key]}")
    if not isinstance(kw.get("executor", "local"), str):
        raise ConfigError(f"{where}: 'run.executor' must be an executor plugin name, got {kw['executor']!r}")
    kw["executor_options"] = _mapping(where, "run.executor_options", kw.get("executor_options"))
    if "max_evaluations" in kw:
        kw["iterations"] = int(kw.pop("max_evaluations"))
    for key in ("archive", "selection"):
        if data.get(key) is not None:
            kw[key] = _spec(where, key, data[key])
    if data.get("sandbox") is not None:
        kw["sandbox"] = _spec(where, "sandbox", data["sandbox"])
    if "backend" in data:
        kw["backend"] = None if data["backend"] is None else _spec(where, "backend", data["backend"])
    if data.get("mutation") is not None:
        ops = data["mutation"]
        if isinstance(ops, (str, dict)):
            ops = [ops]
        if not isinstance(ops, list) or not ops:
            raise ConfigError(f"{where}: 'mutation' must be a list of operator specs")
        kw["mutation"] = [_spec(where, f"mutation[{i}]", op) for i, op in enumerate(ops)]
    limits = _mapping(where, "limits", data.get("limits"))
    _unknown(where, "limits", limits, LIMIT_KEYS)
    if limits:
        kw["limits"] = {"wall_s": 30.0, **limits}
    ev = _mapping(where, "evaluator", data.get("evaluator"))
    _unknown(where, "evaluator", ev, EVALUATOR_KEYS)
    if "timeout" in ev:
        kw.setdefault("limits", {"wall_s": 30.0})
        kw["limits"] = {**kw["limits"], "wall_s": float(ev["timeout"])}
    kw["evaluator"] = {k: v for k, v in ev.items() if k != "timeout"}
    insp = _mapping(where, "inspirations", data.get("inspirations"))
    _unknown(where, "inspirations", insp, INSPIRATION_KEYS)
    if insp:
        kw["inspirations"] = {"n_best": 2, "n_diverse": 2, **insp}
    kw["prompt"] = _mapping(where, "prompt", data.get("prompt"))
    if data.get("train") is not None:
        kw["train"] = _mapping(where, "train", data["train"])
    if data.get("budget") is not None:  # token / cost / wall-time budgets
        from qdevolve.evolve.setup.budget import parse_budget

        kw["budget"] = parse_budget(data["budget"], where=where)
    if data.get("novelty") is not None:
        nov = _mapping(where, "novelty", data["novelty"])
        _unknown(where, "novelty", nov, NOVELTY_KEYS)
        kw["novelty"] = nov
    if data.get("record") is not None:  # the problem's best known value
        from qdevolve.evolve.setup.best_known import parse_record

        kw["record"] = parse_record(data["record"], where=where)
    if data.get("objectives") is not None:  # several objectives: the pareto archive's
        kw["objectives"], kw["archive"] = _objectives(where, data["objectives"], kw.get("archive"))
    return RunConfig(**kw)


def _objectives(where: str, value: Any, archive: dict[str, Any] | None) -> tuple[dict[str, str], dict[str, Any]]:
    """The checked ``objectives`` and the archive spec that reads them: a ``pareto`` archive
    (or the ``pareto`` inner archive of ``islands``) gets them unless it names its own, which
    must then be the same. Any other archive ranks by ``combined_score`` alone: refused, since
    the declared objectives would take no effect."""
    from qdevolve.archive.pareto import parse_objectives

    objectives = parse_objectives(value, where=f"{where}: objectives")
    spec = dict(archive or {"type": "map_elites"})
    target = spec
    if spec.get("type") == "islands":
        inner = spec.get("inner")
        target = dict({"type": inner} if isinstance(inner, str) else inner or {})
        if target.get("type") != "pareto" and spec.get("objectives") is None:
            target = spec
    if target.get("type") != "pareto":
        raise ConfigError(f"{where}: 'objectives' needs an archive that reads them: set 'archive: {{type: pareto}}' "
                          f"(archive is {target.get('type')!r}, which ranks by combined_score alone)")
    own = target.get("objectives")
    if own is not None and dict(own) != objectives:
        raise ConfigError(f"{where}: 'archive.objectives' {dict(own)} differs from 'objectives' {objectives}; "
                          "give them once")
    target["objectives"] = objectives
    if target is not spec:
        spec["inner"] = target
    return objectives, spec


def load_config(path: str | Path | None) -> RunConfig:
    """Load ``config.yaml`` (``None`` or a missing optional file gives the defaults)."""
    if path is None:
        return RunConfig()
    from qdevolve.evolve.setup.validate import read_config_yaml

    return parse_config(read_config_yaml(Path(path)), where=str(path))
