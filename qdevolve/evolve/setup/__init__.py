"""What a run is asked to do, read and checked before anything is evaluated: the config
(:class:`RunConfig`), the example directory (:class:`Example`), the trust rules (one walk
over the config tree, the user's trust store, the decision a run makes), the
budgets, the best known value, ``--plugin`` files and the seed-failure report.

Uses :mod:`qdevolve.evolve.compat` for foreign formats and nothing above it; the engine
(:mod:`qdevolve.evolve.core`), training and report packages build on these types.
"""

from qdevolve.evolve.setup.best_known import parse_record, record_line
from qdevolve.evolve.setup.budget import (
    BUDGET_FLAGS,
    BudgetMeter,
    budget_warnings,
    parse_budget,
    parse_budget_flag,
    with_budget_flags,
)
from qdevolve.evolve.setup.config import RunConfig, cli_fields, load_config, parse_config
from qdevolve.evolve.setup.consent import settle_trust, trust_from_store
from qdevolve.evolve.setup.example import Example, load_example, read_program
from qdevolve.evolve.setup.plugin_files import current_plugin_files, reload_plugin_files
from qdevolve.evolve.setup.policy_spec import BUILTIN_POLICIES, policy_path, policy_warnings
from qdevolve.evolve.setup.seed_failure import SeedFailed, seed_failure
from qdevolve.evolve.setup.trust import Trust, check_stored_trust, host_keys
from qdevolve.evolve.setup.trust_store import TrustStore
from qdevolve.evolve.setup.validate import (
    check_iterations,
    check_plugin_file,
    check_start,
    read_config_yaml,
    sandbox_env,
)

__all__ = [
    "RunConfig", "load_config", "parse_config", "cli_fields",
    "Example", "load_example", "read_program",
    "Trust", "check_stored_trust", "host_keys", "TrustStore", "settle_trust", "trust_from_store",
    "BudgetMeter", "parse_budget", "parse_budget_flag", "with_budget_flags", "budget_warnings", "BUDGET_FLAGS",
    "parse_record", "record_line",
    "current_plugin_files", "reload_plugin_files",
    "SeedFailed", "seed_failure",
    "BUILTIN_POLICIES", "policy_path", "policy_warnings",
    "check_iterations", "check_plugin_file", "check_start", "read_config_yaml", "sandbox_env",
]
