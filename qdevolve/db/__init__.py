"""The lineage store and its views."""

from qdevolve.db._lease import RunLease, RunLocked
from qdevolve.db.records import EdgeRecord, EvaluationRecord, RewardRecord
from qdevolve.db.schema import SCHEMA_VERSION
from qdevolve.db.store import LineageStore, dumps, loads, open_store

__all__ = ["LineageStore", "open_store", "SCHEMA_VERSION", "dumps", "loads", "EvaluationRecord", "EdgeRecord",
           "RewardRecord", "RunLease", "RunLocked"]
