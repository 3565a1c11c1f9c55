"""ShinkaEvolve's example layout: ``initial.<ext>`` + ``evaluate.py`` with ``main(program_path, results_dir)``.

A ShinkaEvolve evaluator does not return its result: ``main`` writes two files into
``results_dir``. qdevolve runs it through a generated *adapter evaluator*, written into a
copy of the example's directory (the sandbox copies an evaluator's whole directory, readable
by the trusted runner only), which embeds the evaluator's source, calls ``main`` with a fresh
results directory only the runner's uid may enter (``0700``; the candidate runs under another
uid) and turns the files into qdevolve's evaluator protocol, reading only regular files the
runner wrote there:

=====================================  =============================================
ShinkaEvolve                           qdevolve
=====================================  =============================================
``metrics.json`` ``combined_score``    ``EvalResult.score``
``metrics.json`` ``public`` numbers    ``EvalResult.metrics`` (other values: artifacts)
``metrics.json`` other top-level nums  ``EvalResult.metrics``
``metrics.json`` ``text_feedback``     artifact ``text_feedback`` (shown in prompts)
``metrics.json`` ``private``           artifacts ``private.<key>`` (stored, never
                                       shown in prompts)
``correct.json`` ``correct: false``    status ``error`` with ``correct.json``'s
                                       ``error`` text
no ``metrics.json``                    status ``error`` naming the missing file
=====================================  =============================================

The example's other files (an ``env.py`` that ``evaluate.py`` imports, data files) travel
with the adapter: importable, and readable relative to ``__file__``, inside every sandbox.

Evaluators that import ``shinka`` (``from shinka.core import run_shinka_eval``) need the
``shinka-evolve`` package, installed with the extra ``pip install 'qdevolve[shinka]'``; the
sandbox runner sees the controller's site-packages, so it imports there too.

Config: a ShinkaEvolve YAML (its ``evo_config`` / ``EvolutionConfig`` fields, optionally
under ``evo_config:``) is mapped by :func:`map_shinka`; see ``docs/shinka.md``.
"""

from __future__ import annotations

import ast
import atexit
import hashlib
import importlib.util
import shutil
import tempfile
from pathlib import Path
from typing import Any

from qdevolve.errors import EvaluationSetupError

__all__ = ["SEED_STEM", "EVALUATOR_NAME", "is_shinka_evaluator", "adapter_evaluator", "map_shinka",
           "looks_like_shinka", "SHINKA_KEYS", "results_to_record"]

SEED_STEM = "initial"
EVALUATOR_NAME = "evaluate.py"
MAX_EVALUATOR_BYTES = 4 << 20

# The adapter's body. ``results_to_record`` below is copied into it verbatim (by source), so
# the controller and the sandbox share one definition of the mapping.
_ADAPTER = '''"""qdevolve adapter for the ShinkaEvolve evaluator {origin!r} (generated; do not edit)."""

import json
import os
import stat
import sys
import tempfile
import types

_SOURCE = {source!r}
_ORIGIN = {origin!r}
_NAME = {name!r}
_module = None


def _load():
    global _module
    if _module is None:
        # The example's other files (an env.py that evaluate.py imports, data files) lie beside
        # this adapter: the sandbox copies its directory (readable by the trusted runner only)
        # and puts it first on sys.path.
        here = os.path.dirname(os.path.abspath(__file__))
        if here not in sys.path:
            sys.path.insert(0, here)
        mod = types.ModuleType("shinka_evaluate")
        mod.__file__ = os.path.join(here, _NAME)
        sys.modules["shinka_evaluate"] = mod
        exec(compile(_SOURCE, _ORIGIN, "exec"), mod.__dict__)
        _module = mod
    return _module


def _private_dir(prefix):
    """A new directory only this process's uid may enter (the candidate runs under another)."""
    path = tempfile.mkdtemp(prefix=prefix)
    st = os.lstat(path)
    if st.st_uid != os.getuid() or not stat.S_ISDIR(st.st_mode) or stat.S_IMODE(st.st_mode) & 0o077:
        raise RuntimeError(f"results directory {{path}} is not private to the evaluator")
    return path


def _read_json(path):
    """A results file the evaluator wrote: a regular file of this uid (no link, no FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise RuntimeError(f"{{os.path.basename(path)}} in results_dir is not a regular file "
                               "written by the evaluator")
        return json.loads(fh.read(16 << 20).decode("utf-8"))


{results_to_record}


def evaluate(program_path):
    results_dir = _private_dir("shinka-results-")
    _load().main(program_path, results_dir)
    return results_to_record(_read_json(os.path.join(results_dir, "metrics.json")),
                             _read_json(os.path.join(results_dir, "correct.json")))
'''


def results_to_record(metrics: object, correct: object) -> dict:
    """Map ShinkaEvolve's ``metrics.json`` / ``correct.json`` contents onto an evaluator result."""
    import json as _json
    import math as _math

    def _num(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        return float(v) if _math.isfinite(float(v)) else None

    def _text(v):
        return v if isinstance(v, str) else _json.dumps(v, default=str, sort_keys=True)

    if not isinstance(metrics, dict):
        return {"error": "the evaluator's main() wrote no metrics.json object into results_dir"}
    out_metrics, artifacts = {}, {}
    for key, value in metrics.items():
        if key in ("public", "private") and isinstance(value, dict):
            for k, v in value.items():
                if key == "public" and _num(v) is not None:
                    out_metrics[str(k)] = _num(v)
                else:
                    artifacts[f"{key}.{k}"] = _text(v)
        elif key == "combined_score":
            continue
        elif _num(value) is not None:
            out_metrics[str(key)] = _num(value)
        elif value is not None:
            artifacts[str(key)] = _text(value)
    record = dict(out_metrics)
    score = metrics.get("combined_score")
    record["combined_score"] = score if score is not None else 0.0
    record["artifacts"] = artifacts
    if isinstance(correct, dict) and correct.get("correct") is False:
        why = correct.get("error") or "correct.json reports correct: false"
        record["error"] = str(why)
    return record


def is_shinka_evaluator(path: Path) -> bool:
    """True when ``path`` defines a module-level ``main`` and no ``evaluate`` (static check)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return False
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return "main" in names and "evaluate" not in names


def _imports_shinka(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "shinka" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "shinka":
            return True
    return False


_ADAPTER_DIR: Path | None = None
ADAPTER_NAME = "qdevolve_shinka_adapter.py"


def _example_files(evaluate_py: Path) -> dict[str, bytes]:
    """The files of the example's directory that travel with the adapter (bounded, as the
    sandbox bounds an evaluator's directory; the seed stays behind)."""
    from qdevolve.sandbox._evaldir import scan

    found = scan(evaluate_py)
    out: dict[str, bytes] = {}
    for rel in found.files:
        if rel == ADAPTER_NAME or ("/" not in rel and Path(rel).stem == SEED_STEM):
            continue
        try:
            out[rel] = (found.root / rel).read_bytes()
        except OSError as exc:
            raise EvaluationSetupError(f"{found.root / rel}: cannot be read: {exc.strerror or exc}") from None
    return out


def _adapter_dir() -> Path:
    global _ADAPTER_DIR
    if _ADAPTER_DIR is None:
        _ADAPTER_DIR = Path(tempfile.mkdtemp(prefix="qdevolve-shinka-"))
        atexit.register(shutil.rmtree, str(_ADAPTER_DIR), True)
    return _ADAPTER_DIR


def adapter_evaluator(evaluate_py: Path) -> Path:
    """Write (once per content) the adapter evaluator for ``evaluate_py`` and return its path.

    Raises:
        EvaluationSetupError: the evaluator is unreadable, too large, does not parse, has no
            ``main``, or imports ``shinka`` while ``shinka-evolve`` is not installed.
    """
    try:
        size = evaluate_py.stat().st_size
        if size > MAX_EVALUATOR_BYTES:
            raise EvaluationSetupError(f"{evaluate_py}: {size} bytes; an evaluator may have at most "
                                       f"{MAX_EVALUATOR_BYTES} bytes")
        source = evaluate_py.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise EvaluationSetupError(f"{evaluate_py}: is not UTF-8 text") from None
    except OSError as exc:
        raise EvaluationSetupError(f"{evaluate_py}: cannot be read: {exc.strerror or exc}") from None
    try:
        tree = ast.parse(source, filename=str(evaluate_py))
    except SyntaxError as exc:
        raise EvaluationSetupError(f"{evaluate_py}:{exc.lineno}: syntax error: {exc.msg}") from None
    if not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "main" for n in tree.body):
        raise EvaluationSetupError(f"{evaluate_py}: defines no main(program_path, results_dir); a "
                                   "ShinkaEvolve evaluator writes metrics.json from main()")
    if _imports_shinka(tree) and importlib.util.find_spec("shinka") is None:
        raise EvaluationSetupError(f"{evaluate_py}: imports 'shinka', which is not installed; install "
                                   "it with: pip install 'qdevolve[shinka]' (the shinka-evolve package)")
    helper = ast.get_source_segment(Path(__file__).read_text(encoding="utf-8"),
                                    next(n for n in ast.parse(Path(__file__).read_text(encoding="utf-8")).body
                                         if isinstance(n, ast.FunctionDef) and n.name == "results_to_record"))
    text = _ADAPTER.format(source=source, origin=str(evaluate_py.resolve()), results_to_record=helper,
                           name=evaluate_py.name)
    files = _example_files(evaluate_py)
    digest = hashlib.sha256(text.encode("utf-8"))
    for rel in sorted(files):
        digest.update(f"\0{rel}\0{len(files[rel])}\0".encode())
        digest.update(files[rel])
    out = _adapter_dir() / digest.hexdigest()[:16] / ADAPTER_NAME
    if not out.exists():
        tmp = Path(tempfile.mkdtemp(prefix=".adapter-", dir=_adapter_dir()))
        for rel, data in files.items():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data)
        (tmp / ADAPTER_NAME).write_text(text, encoding="utf-8")
        try:
            tmp.rename(out.parent)
        except OSError:  # made meanwhile by another thread
            shutil.rmtree(tmp, ignore_errors=True)
    return out


# -- config ------------------------------------------------------------------------------------
SHINKA_KEYS = ("evo_config", "num_generations", "max_parallel_jobs", "max_evaluation_jobs", "max_proposal_jobs", "patch_types", "patch_type_probs",
               "llm_models", "llm_kwargs", "language", "init_program_path", "task_sys_msg",
               "max_novelty_attempts", "code_embed_sim_threshold", "embedding_model", "results_dir",
               "job_type", "max_api_costs", "num_islands", "archive_size", "migration_interval",
               "migration_rate", "parent_selection_strategy", "parent_selection_lambda",
               "exploitation_ratio", "exploitation_alpha", "elite_selection_ratio", "num_archive_inspirations",
               "num_top_k_inspirations", "db_config", "job_config", "evolve_config", "seed")
_PATCH_TO_OPERATOR = {"diff": "diff", "full": "rewrite", "cross": "crossover"}
_SELECTION = {"power_law": "power_law", "weighted": "dgm", "hill_climbing": "tournament",
              "beam_search": "tournament"}


def map_shinka(data: dict[str, Any], *, where: str = "config") -> dict[str, Any]:
    """Native sections for a ShinkaEvolve YAML; ``_warnings`` lists the fields left unused.

    Mapped: ``num_generations`` -> ``run.iterations``, ``max_evaluation_jobs`` -> ``run.workers``,
    ``max_proposal_jobs`` -> ``run.max_pending``,
    ``patch_types``/``patch_type_probs`` -> weighted ``mutation`` (diff, full -> rewrite,
    cross -> crossover), ``llm_models`` -> ``backend.models`` (``llm_kwargs`` temperatures,
    ``max_tokens``), ``task_sys_msg`` -> ``prompt.system_message``, ``num_islands``/
    ``migration_interval``/``migration_rate`` -> the ``islands`` archive,
    ``parent_selection_strategy`` (+ ``exploitation_alpha`` as the power-law exponent,
    ``parent_selection_lambda``), ``num_top_k_inspirations``/``num_archive_inspirations`` ->
    ``inspirations``, ``max_api_costs`` -> ``budget.max_cost``,
    ``code_embed_sim_threshold`` -> ``novelty.threshold``.
    """
    flat: dict[str, Any] = {}
    for section in ("db_config", "evolve_config", "evo_config", "job_config"):
        if isinstance(data.get(section), dict):
            flat.update(data[section])
    flat.update({k: v for k, v in data.items() if k not in ("db_config", "evolve_config", "evo_config", "job_config")})
    out: dict[str, Any] = {"run": {}, "prompt": {}}
    unused: list[str] = []
    if flat.get("num_generations") is not None:
        out["run"]["iterations"] = flat["num_generations"]
    workers = flat.get("max_evaluation_jobs", flat.get("max_parallel_jobs"))
    if workers is not None:
        out["run"]["workers"] = workers
    if flat.get("max_proposal_jobs") is not None:
        out["run"]["max_pending"] = flat["max_proposal_jobs"]
    if flat.get("seed") is not None:
        out["run"]["seed"] = flat["seed"]
    models = flat.get("llm_models") or []
    if isinstance(models, str):
        models = [models]
    if models:
        backend: dict[str, Any] = {"type": "openai", "models": [{"name": str(m), "weight": 1.0} for m in models]}
        kw = flat.get("llm_kwargs") or {}
        temps = kw.get("temperatures")
        if isinstance(temps, (int, float)):
            backend["temperature"] = float(temps)
        elif isinstance(temps, list) and temps:
            backend["temperature"] = float(temps[0])
        if kw.get("max_tokens") is not None:
            backend["max_tokens"] = int(kw["max_tokens"])
        out["backend"] = backend
        types = flat.get("patch_types") or ["diff", "full"]
        probs = flat.get("patch_type_probs") or [1.0 / len(types)] * len(types)
        ops = []
        for t, p in zip(types, probs, strict=False):
            if t in _PATCH_TO_OPERATOR:
                ops.append({"type": _PATCH_TO_OPERATOR[t], "weight": float(p)})
            else:
                unused.append(f"patch_types[{t}]")
        if ops:
            out["mutation"] = ops
    if flat.get("task_sys_msg"):
        out["prompt"]["system_message"] = str(flat["task_sys_msg"])
    n_islands = int(flat.get("num_islands") or 1)
    inner: dict[str, Any] = {"type": "map_elites", "feature_dimensions": ["complexity", "code_diversity"]}
    if n_islands > 1:
        arch: dict[str, Any] = {"type": "islands", "n_islands": n_islands, "inner": inner}
        if flat.get("migration_interval") is not None:
            arch["migration_interval"] = int(flat["migration_interval"])
        if flat.get("migration_rate") is not None:
            arch["migration_fraction"] = float(flat["migration_rate"])
        out["archive"] = arch
    else:
        out["archive"] = inner
    strategy = flat.get("parent_selection_strategy")
    if strategy:
        sel = _SELECTION.get(str(strategy))
        if sel is None:
            unused.append(f"parent_selection_strategy={strategy}")
        else:
            spec: dict[str, Any] = {"type": sel}
            if sel == "power_law" and flat.get("exploitation_alpha") is not None:
                spec["alpha"] = float(flat["exploitation_alpha"])
            if sel == "dgm" and flat.get("parent_selection_lambda") is not None:
                spec["lambda_"] = float(flat["parent_selection_lambda"])
            out["selection"] = spec
    insp = {}
    if flat.get("num_top_k_inspirations") is not None:
        insp["n_best"] = int(flat["num_top_k_inspirations"])
    if flat.get("num_archive_inspirations") is not None:
        insp["n_diverse"] = int(flat["num_archive_inspirations"])
    if insp:
        out["inspirations"] = insp
    if flat.get("max_api_costs") is not None:
        out["budget"] = {"max_cost": float(flat["max_api_costs"])}
    if flat.get("code_embed_sim_threshold") is not None:
        out["novelty"] = {"threshold": float(flat["code_embed_sim_threshold"])}
    handled = {"num_generations", "max_parallel_jobs", "max_evaluation_jobs", "max_proposal_jobs", "seed", "llm_models", "llm_kwargs", "patch_types",
               "patch_type_probs", "task_sys_msg", "num_islands", "migration_interval", "migration_rate",
               "parent_selection_strategy", "exploitation_alpha", "parent_selection_lambda",
               "num_top_k_inspirations", "num_archive_inspirations", "max_api_costs",
               "code_embed_sim_threshold", "language", "init_program_path", "results_dir", "job_type"}
    unused += sorted(k for k in flat if k not in handled)
    if unused:
        out["_warnings"] = [f"{where}: ShinkaEvolve fields not used by qdevolve (ignored): {', '.join(unused)}"]
    return out


def looks_like_shinka(data: dict[str, Any]) -> bool:
    """True for a ShinkaEvolve YAML (its section names or ``num_generations``/``patch_types``)."""
    return any(k in data for k in ("evo_config", "db_config", "job_config", "evolve_config",
                                   "num_generations", "patch_types", "llm_models", "max_evaluation_jobs"))
