"""The tables and columns of :mod:`qdevolve.db.schema` as plain names, for checking a
database file without importing SQLAlchemy (``tests/db/test_crafted_databases.py`` keeps the
two equal)."""

TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    'archive_snapshots': ('id', 'run_id', 'eval_id', 'evaluations', 'event_id', 'format', 'state', 'created_at',),
    'prompt_templates': ('seq', 'id', 'run_id', 'parent_id', 'name', 'text', 'origin', 'status', 'reason', 'retires', 'generation', 'metadata', 'created_at',),
    'plugin_files': ('id', 'run_id', 'path', 'sha256', 'names', 'loaded_at',),
    'policy_versions': ('run_id', 'version', 'parent_version', 'objective', 'step', 'path', 'metrics', 'created_at',),
    'qdevolve_schema': ('version', 'qdevolve_version', 'created_at',),
    'run_leases': ('run_id', 'owner', 'host', 'pid', 'acquired_at', 'heartbeat_at',),
    'run_state': ('run_id', 'key', 'value', 'updated_at',),
    'runs': ('id', 'name', 'status', 'example_dir', 'seed', 'config', 'created_at', 'updated_at',),
    'programs': ('seq', 'id', 'run_id', 'code', 'language', 'code_hash', 'generation', 'island', 'operator', 'prompt_hash', 'policy_version', 'created_at', 'metadata',),
    'archive_events': ('id', 'run_id', 'program_id', 'archive', 'island', 'cell', 'kind', 'replaced_id', 'score', 'data', 'created_at',),
    'edges': ('parent_id', 'child_id', 'role', 'position', 'run_id',),
    'evaluations': ('id', 'program_id', 'run_id', 'status', 'score', 'metrics', 'tests', 'features', 'artifacts', 'error', 'runtime_s', 'peak_memory_mb', 'sandbox', 'worker', 'created_at',),
    'rollouts': ('seq', 'id', 'run_id', 'program_id', 'group_id', 'policy_version', 'prompt', 'completion', 'prompt_token_ids', 'token_ids', 'logprobs', 'reward', 'reward_vector', 'cluster_key', 'finish_reason', 'prompt_tokens', 'completion_tokens', 'created_at', 'metadata',),
}
