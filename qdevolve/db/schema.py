"""Tables of the lineage database (SQLAlchemy Core). Documented in ``docs/schema.md``.

JSON-valued columns are TEXT holding JSON so ``sqlite3`` users can read them with
``json_extract``. Times are Unix seconds (REAL).
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

from qdevolve.db._version import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "metadata", "schema_table", "runs", "programs", "edges",
           "evaluations", "archive_events", "rollouts", "policy_versions", "plugin_files",
           "run_state", "run_leases", "archive_snapshots", "prompt_templates"]


metadata = MetaData()

schema_table = Table(
    "qdevolve_schema",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("qdevolve_version", String(32), nullable=False),
    Column("created_at", Float, nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("status", String(20), nullable=False, default="running"),
    Column("example_dir", Text),
    Column("seed", Integer),
    Column("config", Text, nullable=False, default="{}"),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
)

programs = Table(
    "programs",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("id", String(64), nullable=False, unique=True),
    Column("run_id", String(64), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("code", Text, nullable=False),
    Column("language", String(20), nullable=False, default="python"),
    Column("code_hash", String(64), nullable=False),
    Column("generation", Integer, nullable=False, default=0),
    Column("island", Integer, nullable=False, default=0),
    Column("operator", String(64), nullable=False, default="seed"),
    Column("prompt_hash", String(64)),
    Column("policy_version", Integer),
    Column("created_at", Float, nullable=False),
    Column("metadata", Text, nullable=False, default="{}"),
    Index("ix_programs_run_seq", "run_id", "seq"),
    Index("ix_programs_run_hash", "run_id", "code_hash"),
)

# Keyed child-first and, on SQLite, stored WITHOUT ROWID: walking up a lineage (the
# recursive ancestry CTE) reads one B-tree per step, and an insert touches three B-trees.
edges = Table(
    "edges",
    metadata,
    Column("parent_id", String(64), ForeignKey("programs.id", ondelete="CASCADE"), nullable=False),
    Column("child_id", String(64), ForeignKey("programs.id", ondelete="CASCADE"), nullable=False),
    Column("role", String(20), nullable=False),
    Column("position", Integer, nullable=False, default=0),
    Column("run_id", String(64), nullable=False),
    PrimaryKeyConstraint("child_id", "role", "parent_id", name="pk_edges"),
    Index("ix_edges_parent", "parent_id"),
    Index("ix_edges_run", "run_id"),
    sqlite_with_rowid=False,
)

evaluations = Table(
    "evaluations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("program_id", String(64), ForeignKey("programs.id", ondelete="CASCADE"), nullable=False),
    Column("run_id", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("score", Float),
    Column("metrics", Text, nullable=False, default="{}"),
    Column("tests", Text),
    Column("features", Text, nullable=False, default="{}"),
    Column("artifacts", Text, nullable=False, default="{}"),
    Column("error", Text),
    Column("runtime_s", Float, nullable=False, default=0.0),
    Column("peak_memory_mb", Float),
    Column("sandbox", String(32)),
    Column("worker", String(128)),
    Column("created_at", Float, nullable=False),
    Index("ix_evaluations_program", "program_id"),
    Index("ix_evaluations_run", "run_id", "id"),
)

archive_events = Table(
    "archive_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False),
    Column("program_id", String(64), ForeignKey("programs.id", ondelete="CASCADE"), nullable=False),
    Column("archive", String(64), nullable=False),
    Column("island", Integer, nullable=False, default=0),
    Column("cell", String(200)),
    Column("kind", String(16), nullable=False),
    Column("replaced_id", String(64)),
    Column("score", Float),
    Column("data", Text, nullable=False, default="{}"),
    Column("created_at", Float, nullable=False),
    Index("ix_archive_events_run", "run_id", "id"),
)

rollouts = Table(
    "rollouts",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("id", String(64), nullable=False, unique=True),
    Column("run_id", String(64), nullable=False),
    Column("program_id", String(64), ForeignKey("programs.id", ondelete="SET NULL")),
    Column("group_id", String(64)),
    Column("policy_version", Integer),
    Column("prompt", Text, nullable=False),
    Column("completion", Text, nullable=False),
    Column("prompt_token_ids", Text, nullable=False, default="[]"),
    Column("token_ids", Text, nullable=False, default="[]"),
    Column("logprobs", Text, nullable=False, default="[]"),
    Column("reward", Float),
    Column("reward_vector", Text),
    Column("cluster_key", String(200)),
    Column("finish_reason", String(32)),
    Column("prompt_tokens", Integer, nullable=False, default=0),
    Column("completion_tokens", Integer, nullable=False, default=0),
    Column("created_at", Float, nullable=False),
    Column("metadata", Text, nullable=False, default="{}"),
    Index("ix_rollouts_run_seq", "run_id", "seq"),
    Index("ix_rollouts_program", "program_id"),
    Index("ix_rollouts_group", "group_id"),
)

policy_versions = Table(
    "policy_versions",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("parent_version", Integer),
    Column("objective", String(64)),
    Column("step", Integer, nullable=False, default=0),
    Column("path", Text),
    Column("metrics", Text, nullable=False, default="{}"),
    Column("created_at", Float, nullable=False),
)

plugin_files = Table(
    "plugin_files",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False),
    Column("path", Text, nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("names", Text, nullable=False, default="[]"),
    Column("loaded_at", Float, nullable=False),
)

run_state = Table(
    "run_state",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("key", String(200), primary_key=True),
    Column("value", Text, nullable=False),
    Column("updated_at", Float, nullable=False),
)

# One writer per run: the process that holds a run's row here (and keeps heartbeat_at fresh)
# is the only one allowed to extend the run; a row whose heartbeat is stale, or whose process
# on this host is gone, may be taken over.
run_leases = Table(
    "run_leases",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("owner", String(64), nullable=False),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("acquired_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
)

# The archive's whole state every so many tells (qdevolve.archive.snapshot), written in the
# transaction of the tell whose evaluation is ``eval_id``: a reader restores the newest one
# and replays only the evaluations after it.
archive_snapshots = Table(
    "archive_snapshots",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False),
    Column("eval_id", Integer, nullable=False),
    Column("evaluations", Integer, nullable=False),
    Column("event_id", Integer, nullable=False, default=0),
    Column("format", Integer, nullable=False),
    Column("state", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_archive_snapshots_run", "run_id", "eval_id"),
)

# The second population (qdevolve.prompts.evolution): every prompt template a run made, valid
# or refused, written in the transaction of the tell that follows its creation. A child names
# its template in ``programs.metadata["template_id"]`` (and its rollout's metadata).
prompt_templates = Table(
    "prompt_templates",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("id", String(64), nullable=False, unique=True),
    Column("run_id", String(64), nullable=False),
    Column("parent_id", String(64)),
    Column("name", String(64), nullable=False),
    Column("text", Text, nullable=False),
    Column("origin", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("reason", Text),
    Column("retires", String(64)),
    Column("generation", Integer, nullable=False, default=0),
    Column("metadata", Text, nullable=False, default="{}"),
    Column("created_at", Float, nullable=False),
    Index("ix_prompt_templates_run", "run_id", "seq"),
)
