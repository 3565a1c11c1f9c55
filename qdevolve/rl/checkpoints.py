"""Policy versions on disk and in the store: where weights go, how a version is saved and loaded.

A version is a ``save_pretrained`` directory (model and tokenizer; LoRA adapters merged
into a plain model) with ``trainer_state.pt`` beside the weights, plus a
``policy_versions`` row recording the path, step, objective and metrics. The row is
written atomically with the run state ``trainer`` (and any extra state the caller passes,
e.g. the joined loop's ``last_seq``), so a kill leaves either the whole version or none.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError

__all__ = ["policy_dir", "save_version", "load_version", "LoadedVersion"]


def policy_dir(store: LineageStore, run_id: str, version: int) -> Path:
    """Where version ``version`` of ``run_id`` is saved: next to the database file."""
    if store.path is None:
        raise ConfigError("saving policy versions of a database given by URL needs an explicit path=")
    return store.path.parent / f"{store.path.stem}.policies" / run_id / f"v{version}"


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
    torch.save(trainer_state, target / "trainer_state.pt")
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
    state = torch.load(state_file, weights_only=False) if state_file.is_file() else None
    return LoadedVersion(row, model, tokenizer, state)
