"""The lineage store and its views."""

from qdevolve.db.schema import SCHEMA_VERSION
from qdevolve.db.store import LineageStore, dumps, loads, open_store

__all__ = ["LineageStore", "open_store", "SCHEMA_VERSION", "dumps", "loads"]
