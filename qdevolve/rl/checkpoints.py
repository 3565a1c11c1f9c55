"""Policy versions on disk and in the store: where weights go, how a version is saved and loaded.

A version is a ``save_pretrained`` directory (model and tokenizer; LoRA adapters merged
into a plain model) with ``trainer_state.pt`` beside the weights, plus a
``policy_versions`` row recording the path, step, objective and metrics. The row is
written atomically with the run state ``trainer`` (and any extra state the caller passes,
e.g. the joined loop's ``last_seq``), so a kill leaves either the whole version or none.

Where the weights go (:func:`policy_dir`), first match wins:

1. the run's ``train.checkpoint_dir`` (config), as ``<checkpoint_dir>/<run id>/v<N>``;
2. a SQLite file: beside it, ``<db stem>.policies/<run id>/v<N>``;
3. a database URL (PostgreSQL...): ``archives/<run name>.policies/<run id>/v<N>`` under the
   current directory when ``archives/`` exists there, else
   ``~/.cache/qdevolve/policies/<database host>/<run id>/v<N>`` (``XDG_CACHE_HOME`` honoured).

The path is made absolute before it is stored, so a later ``resume`` or ``serve`` from
another directory finds it.

A path the database names is an adversary's choice (a database can be handed over), so
``trainer_state.pt`` holds plain data only (tensors, dicts, lists, tuples, numbers, strings:
optimizer state, reference weights, the generator's state as a byte tensor) and is read with
``torch.load(..., weights_only=True)``: a file whose unpickling would build anything else
(a ``__reduce__`` calling a function) is refused with an error naming it, never executed.
The weights themselves load through ``from_pretrained``, which reads safetensors and loads
any ``.bin`` with ``weights_only=True`` too.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError, DatabaseError

__all__ = ["checkpoint_root", "policy_dir", "save_version", "load_version", "LoadedVersion", "load_trainer_state",
           "plain_state"]


def checkpoint_root(store: LineageStore, run_id: str) -> Path:
    """The folder holding every version of ``run_id`` (module docstring: the three rules)."""
    try:
        run = store.get_run(run_id)
    except DatabaseError:  # a trainer on a run id the store has no row for
        run = {"name": run_id, "config": {}}
    configured = ((run.get("config") or {}).get("train") or {}).get("checkpoint_dir")
    if configured:
        return Path(os.path.expanduser(str(configured))).absolute() / run_id
    if store.path is not None:
        return store.path.absolute().parent / f"{store.path.stem}.policies" / run_id
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(run.get("name") or run_id))[:100] or run_id
    if Path("archives").is_dir():
        return Path("archives").absolute() / f"{name}.policies" / run_id
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "qdevolve" / "policies"
    host = re.sub(r"[^A-Za-z0-9_.-]+", "_", getattr(store.engine.url, "host", None) or "db")
    return cache / host / run_id


def policy_dir(store: LineageStore, run_id: str, version: int) -> Path:
    """Where version ``version`` of ``run_id`` is saved: ``checkpoint_root(...)/v<version>``."""
    return checkpoint_root(store, run_id) / f"v{version}"


def save_version(store: LineageStore, run_id: str, *, version: int, parent: int | None, model: Any, tokenizer: Any,
                 trainer_state: dict[str, Any], objective: str, step: int, merge_lora: bool,
                 metrics: dict[str, Any] | None = None, path: str | Path | None = None,
                 extra_state: dict[str, Any] | None = None) -> Path:
    """Write the weights, tokenizer and trainer state, then the version row (one transaction)."""
    target = Path(path) if path is not None else policy_dir(store, run_id, version)
    target.mkdir(parents=True, exist_ok=True)
    plain = copy.deepcopy(model).merge_and_unload() if merge_lora else model
    plain.save_pretrained(target)
    tokenizer.save_pretrained(target)
    torch.save(plain_state(trainer_state), target / "trainer_state.pt")
    state = {"trainer": {"version": version, "global_step": step, "path": str(target), "objective": objective},
             **(extra_state or {})}
    store.add_policy_version(run_id, version, objective=objective, parent_version=parent, step=step,
                             path=str(target), metrics=metrics or {}, state=state)
    return target


@dataclass
class LoadedVersion:
    """A stored version: its row, model, tokenizer and trainer state (``None`` if absent)."""

    row: dict[str, Any]
    model: Any
    tokenizer: Any
    trainer_state: dict[str, Any] | None

    @property
    def version(self) -> int:
        return int(self.row["version"])


def load_version(store: LineageStore, run_id: str, version: int | None = None) -> LoadedVersion:
    """Load a stored version (the latest by default)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rows = store.policy_versions(run_id)
    if not rows:
        raise ConfigError(f"run {run_id} has no policy versions in {store.target}")
    row = rows[-1] if version is None else next((r for r in rows if r["version"] == version), None)
    if row is None:
        raise ConfigError(f"run {run_id} has no policy version {version}; it has "
                          f"{', '.join(str(r['version']) for r in rows)}")
    model = AutoModelForCausalLM.from_pretrained(row["path"], dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(row["path"])
    state_file = Path(row["path"]) / "trainer_state.pt"
    state = load_trainer_state(state_file) if state_file.is_file() else None
    return LoadedVersion(row, model, tokenizer, state)


_PLAIN = (bool, int, float, str, bytes, type(None), torch.Tensor)


def plain_state(state: Any, where: str = "trainer_state") -> Any:
    """``state`` checked to be what a ``weights_only=True`` load accepts (tensors, dicts, lists,
    tuples, numbers, strings, None); anything else is a ``ConfigError`` naming its key path, so
    a checkpoint that could not be resumed safely is never written."""
    if isinstance(state, dict):
        return {k: plain_state(v, f"{where}[{k!r}]") for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(plain_state(v, f"{where}[{i}]") for i, v in enumerate(state))
    if isinstance(state, _PLAIN):
        return state
    raise ConfigError(f"{where} is a {type(state).__name__}: trainer_state.pt holds plain data only "
                      "(tensors, dicts, lists, numbers, strings) so resume can load it with weights_only=True")


def load_trainer_state(path: Path) -> dict[str, Any]:
    """Read ``trainer_state.pt`` with ``weights_only=True``; a file that is not plain data (a pickle
    that would build objects or call functions) is refused, naming the file, and never executed."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # UnpicklingError for a forbidden global; anything else is a broken file
        raise DatabaseError(f"{path}: refused to load this trainer state: it is not a plain-data checkpoint "
                            f"(weights_only=True load failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}). "
                            "A database or run directory may name any file; only tensors, dicts, lists, numbers "
                            "and strings are accepted. Delete the file to resume from the weights alone.") from None
    if not isinstance(state, dict):
        raise DatabaseError(f"{path}: a trainer state is a dict, this file holds a {type(state).__name__}")
    return state
