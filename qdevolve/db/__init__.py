"""The lineage store and its views.

The names below are imported on first use, so a read-only view of a SQLite file (which
reads with the standard ``sqlite3`` module) starts without SQLAlchemy.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qdevolve.db._lease import RunLease, RunLocked
    from qdevolve.db._open import display_target, sqlite_run_count
    from qdevolve.db.records import EdgeRecord, EvaluationRecord, RewardRecord
    from qdevolve.db.schema import SCHEMA_VERSION
    from qdevolve.db.store import LineageStore, dumps, loads, open_store

_LAZY = {"RunLease": "qdevolve.db._lease", "RunLocked": "qdevolve.db._lease",
         "EdgeRecord": "qdevolve.db.records", "EvaluationRecord": "qdevolve.db.records",
         "RewardRecord": "qdevolve.db.records", "SCHEMA_VERSION": "qdevolve.db._version",
         "LineageStore": "qdevolve.db.store", "dumps": "qdevolve.db.store", "loads": "qdevolve.db.store",
         "open_store": "qdevolve.db.store", "display_target": "qdevolve.db._open",
         "sqlite_run_count": "qdevolve.db._open"}

__all__ = ["LineageStore", "open_store", "SCHEMA_VERSION", "dumps", "loads", "EvaluationRecord", "EdgeRecord",
           "RewardRecord", "RunLease", "RunLocked", "display_target",
           "sqlite_run_count"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'qdevolve.db' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
