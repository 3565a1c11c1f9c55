"""Map an OpenEvolve ``config.yaml`` onto qdevolve's native sections.

The mapping (documented in ``docs/openevolve.md``):

=============================================  ==============================================
OpenEvolve                                     qdevolve
=============================================  ==============================================
``max_iterations``, ``random_seed``            ``run.iterations``, ``run.seed``
``diff_based_evolution`` (true / false)        ``mutation: diff`` / ``rewrite`` (+ crossover)
``llm.api_base``, ``llm.models[].name/weight``  ``backend: {type: openai, api_base, models}``
``llm.primary_model``/``secondary_model``      weighted ``models``
``llm.temperature/top_p/max_tokens``           backend sampling settings
``llm.timeout``, ``llm.retries``               ``backend.timeout_s``, ``backend.retries``
``llm.api_key: ${VAR}``                        ``backend.api_key_env: VAR`` (never stored)
``database.num_islands``, ``migration_*``      ``archive: {type: islands, ...}``
``database.feature_dimensions/feature_bins``   the inner ``map_elites`` grid; ``complexity`` is
                                               the code length, ``diversity`` becomes
                                               ``code_diversity`` (OpenEvolve's formula)
``database.archive_size``                      bins per dimension at least
                                               ``ceil(archive_size ** (1 / dims))`` (as OpenEvolve)
                                               and the exploitation set of the selection rule
``database.exploration/exploitation_ratio``    ``selection: {type: openevolve, ...}``
``evaluator.timeout``                          ``limits.wall_s``
``evaluator.cascade_*``                        ``evaluator.cascade_thresholds`` (on by default,
                                               thresholds ``[0.5, 0.75, 0.9]`` as OpenEvolve)
``evaluator.parallel_evaluations``             ``run.workers``
``prompt.system_message``                      ``prompt.system_message``
``prompt.num_top_programs/num_diverse``        ``inspirations.n_best/n_diverse``
=============================================  ==============================================
"""

from __future__ import annotations

import math
import re
from typing import Any

from qdevolve.errors import ConfigError

__all__ = ["map_openevolve"]

# OpenEvolve's defaults (openevolve/config.py, DatabaseConfig and EvaluatorConfig).
DEFAULT_DIMENSIONS = ("complexity", "diversity")
DEFAULT_BINS = 10
DEFAULT_ARCHIVE_SIZE = 100
DEFAULT_CASCADE = (0.5, 0.75, 0.9)
# OpenEvolve built-in feature names -> qdevolve built-ins with the same definition.
_FEATURE_NAMES = {"diversity": "code_diversity"}
_ENV_REF = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")
_IGNORED_QUIETLY = {"log_level", "log_dir", "checkpoint_interval", "language", "file_suffix"}


def _number(where: str, key: str, value: Any, kind: type = int) -> Any:
    """``kind(value)`` or a :class:`ConfigError` naming the OpenEvolve key."""
    try:
        out = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{where}: '{key}' must be {'an integer' if kind is int else 'a number'}, "
                          f"got {value!r}") from None
    if kind is float and not math.isfinite(out):
        raise ConfigError(f"{where}: '{key}' must be finite, got {value!r}")
    return out


def _models(llm: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for m in llm.get("models") or []:
        if isinstance(m, dict) and m.get("name"):
            out.append({"name": m["name"], "weight": float(m.get("weight", 1.0))})
    if not out:
        for key, wkey in (("primary_model", "primary_model_weight"), ("secondary_model", "secondary_model_weight")):
            if llm.get(key):
                out.append({"name": llm[key], "weight": float(llm.get(wkey, 1.0))})
    return out


def map_openevolve(data: dict[str, Any], *, where: str = "config") -> dict[str, Any]:
    """Return native sections for an OpenEvolve config; ``_warnings`` lists unsupported keys."""
    unsupported: list[str] = []
    out: dict[str, Any] = {"run": {}, "prompt": {}}
    known_top = {"max_iterations", "random_seed", "diff_based_evolution", "llm", "database",
                 "evaluator", "prompt", "max_code_length"} | _IGNORED_QUIETLY
    for key in data:
        if key not in known_top:
            unsupported.append(key)
    if "max_iterations" in data:
        out["run"]["iterations"] = _number(where, "max_iterations", data["max_iterations"])
    if data.get("random_seed") is not None:
        out["run"]["seed"] = _number(where, "random_seed", data["random_seed"])

    llm = data.get("llm") or {}
    models = _models(llm)
    if models or llm.get("api_base"):
        backend: dict[str, Any] = {"type": "openai"}
        if llm.get("api_base"):
            backend["api_base"] = llm["api_base"]
        if models:
            backend["models"] = models
        for src, dst in (("temperature", "temperature"), ("top_p", "top_p"), ("max_tokens", "max_tokens"),
                         ("timeout", "timeout_s"), ("retries", "retries")):
            if llm.get(src) is not None:
                backend[dst] = llm[src]
        key = llm.get("api_key")
        if isinstance(key, str) and key:
            m = _ENV_REF.match(key.strip())
            if m:
                backend["api_key_env"] = m.group(1)
            else:
                unsupported.append("llm.api_key (a literal key: put it in an environment variable "
                                   "and write api_key: ${VAR_NAME}; it was not used)")
        for k in llm:
            if k not in {"models", "primary_model", "primary_model_weight", "secondary_model",
                         "secondary_model_weight", "api_base", "temperature", "top_p", "max_tokens",
                         "timeout", "retries", "api_key", "retry_delay", "evaluator_models"}:
                unsupported.append(f"llm.{k}")
        out["backend"] = backend
        diff = data.get("diff_based_evolution", True)
        out["mutation"] = ([{"type": "diff", "weight": 0.8}, {"type": "rewrite", "weight": 0.1}]
                           if diff else [{"type": "rewrite", "weight": 0.9}])
        out["mutation"].append({"type": "crossover", "weight": 0.1})

    db = data.get("database") or {}
    dims = [_FEATURE_NAMES.get(str(d), str(d)) for d in (db.get("feature_dimensions") or DEFAULT_DIMENSIONS)]
    archive_size = _number(where, "database.archive_size", db.get("archive_size", DEFAULT_ARCHIVE_SIZE))
    inner: dict[str, Any] = {"type": "map_elites", "feature_dimensions": dims}
    bins = db.get("feature_bins", DEFAULT_BINS)
    if isinstance(bins, dict):
        inner["bins"] = {_FEATURE_NAMES.get(str(k), str(k)): v for k, v in bins.items()}
    else:
        # OpenEvolve widens an integer grid so that it has at least archive_size cells.
        inner["bins"] = max(_number(where, "database.feature_bins", bins),
                            int(max(archive_size, 1) ** (1 / max(len(dims), 1)) + 0.99))
    out["selection"] = {"type": "openevolve",
                        "exploration_ratio": _number(where, "database.exploration_ratio", db.get("exploration_ratio", 0.2), float),
                        "exploitation_ratio": _number(where, "database.exploitation_ratio",
                                                      db.get("exploitation_ratio", 0.7), float),
                        "archive_size": archive_size}
    n_islands = _number(where, "database.num_islands", db.get("num_islands", 1) or 1)
    if n_islands > 1:
        archive: dict[str, Any] = {"type": "islands", "n_islands": n_islands, "inner": inner}
        if db.get("migration_interval") is not None:
            archive["migration_interval"] = int(db["migration_interval"])
        if db.get("migration_rate") is not None:
            archive["migration_fraction"] = float(db["migration_rate"])
        out["archive"] = archive
    else:
        out["archive"] = inner
    if db.get("embedding_model"):
        out["novelty"] = {"threshold": float(db.get("similarity_threshold", 0.99))}
        unsupported.append(f"database.embedding_model ({db['embedding_model']!r} replaced by the offline "
                           "local sentence encoder; novelty rejection is on)")
    if db.get("random_seed") is not None and "seed" not in out["run"]:
        out["run"]["seed"] = int(db["random_seed"])
    for k in db:
        if k not in {"feature_dimensions", "feature_bins", "num_islands", "migration_interval",
                     "migration_rate", "random_seed", "db_path", "in_memory", "log_prompts",
                     "embedding_model", "similarity_threshold", "archive_size", "exploration_ratio",
                     "exploitation_ratio"}:
            unsupported.append(f"database.{k}")

    ev = data.get("evaluator") or {}
    out_ev: dict[str, Any] = {}
    if ev.get("timeout") is not None:
        out["limits"] = {"wall_s": _number(where, "evaluator.timeout", ev["timeout"], float)}
    if ev.get("cascade_evaluation", True):
        # On by default, as in OpenEvolve; an evaluator without evaluate_stage1 is unaffected.
        out_ev["cascade_thresholds"] = [float(t) for t in ev.get("cascade_thresholds") or DEFAULT_CASCADE]
    else:
        out_ev["cascade_evaluation"] = False
    if ev.get("parallel_evaluations") is not None:
        out["run"]["workers"] = _number(where, "evaluator.parallel_evaluations", ev["parallel_evaluations"])
    for k in ev:
        if k not in {"timeout", "cascade_evaluation", "cascade_thresholds", "parallel_evaluations",
                     "enable_artifacts", "max_retries"}:
            unsupported.append(f"evaluator.{k}")
    out["evaluator"] = out_ev

    pr = data.get("prompt") or {}
    insp = {}
    if pr.get("num_top_programs") is not None:
        insp["n_best"] = int(pr["num_top_programs"])
    if pr.get("num_diverse_programs") is not None:
        insp["n_diverse"] = int(pr["num_diverse_programs"])
    if insp:
        out["inspirations"] = insp
    for k, v in pr.items():
        if k in ("system_message", "include_artifacts", "max_artifact_bytes", "template_dir"):
            out["prompt"][k] = v
        elif k not in ("num_top_programs", "num_diverse_programs"):
            unsupported.append(f"prompt.{k}")
    if data.get("max_code_length") is not None:
        out["prompt"]["max_code_length"] = int(data["max_code_length"])
    if unsupported:
        out["_warnings"] = [f"{where}: OpenEvolve keys not supported by qdevolve (ignored): {', '.join(unsupported)}"]
    return out
