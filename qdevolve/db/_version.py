"""The lineage schema version, apart from the schema so read-only paths need no SQLAlchemy."""

SCHEMA_VERSION = 4  # v2: evaluations.worker, run_leases; v3: archive_snapshots; v4: prompt_templates
