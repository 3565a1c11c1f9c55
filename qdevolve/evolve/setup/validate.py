"""Input checks that run before anything is evaluated or stored: one line, exit status 2.

Every check raises a :class:`~qdevolve.errors.QdevolveError` subclass whose message names the
file, the field or the option and says what to do. Nothing here evaluates a program, so a
bad option costs no evaluation and leaves no database behind.

* :func:`describe_path` / :func:`require_file`: what a path is when it is not a regular
  file (a directory, a FIFO, a device, a symlink loop, a broken symlink, unreadable).
* :func:`read_config_yaml`: a config file read with bounded size, UTF-8, nesting depth and
  alias expansion (a YAML "billion laughs" document is refused, not expanded).
* :func:`check_run_numbers`: iterations, workers, seed, wall time and limits are finite
  and in range.
* :func:`check_plugins`: every configured archive, selection and mutation plugin can be
  built; a plugin whose constructor raises becomes one line naming the slot.
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from qdevolve.errors import ConfigError, EvaluationSetupError, QdevolveError

__all__ = ["describe_path", "require_file", "read_config_yaml", "check_run_numbers", "check_plugins",
           "check_language", "check_db_target", "check_start", "check_plugin_file", "check_iterations",
           "sandbox_env",
           "MAX_CONFIG_BYTES", "MAX_PROGRAM_BYTES", "MAX_YAML_NODES", "MAX_YAML_DEPTH", "MAX_SEED"]

MAX_CONFIG_BYTES = 1 << 20       # a config file larger than 1 MiB is not a config
MAX_PROGRAM_BYTES = 2 << 20      # a seed program larger than 2 MiB cannot fit any prompt
MAX_YAML_NODES = 100_000         # nodes after alias expansion
MAX_YAML_DEPTH = 64              # mapping/sequence nesting
MAX_SEED = 2**63 - 1             # the run seed is stored as a signed 64-bit integer
MAX_ITERATIONS = 10**9
MAX_WORKERS = 4096


def describe_path(path: Path) -> str | None:
    """``None`` for a readable regular file, else what the path is (``"is a directory"``)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "is a broken symbolic link" if os.path.islink(path) else "does not exist"
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            return "is a symbolic link loop"
        if exc.errno == 13:  # EACCES
            return "cannot be read: permission denied"
        return f"cannot be read: {exc.strerror or exc}"
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe), not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a regular file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a regular file"
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    if not os.access(path, os.R_OK):
        return "cannot be read: permission denied"
    return None


def require_file(path: Path, what: str, *, max_bytes: int | None = None,
                 error: type[QdevolveError] = EvaluationSetupError) -> None:
    """Raise ``error`` unless ``path`` is a readable regular file of at most ``max_bytes``."""
    why = describe_path(path)
    if why is not None:
        raise error(f"{path}: {what} {why}")
    if max_bytes is not None:
        size = path.stat().st_size
        if size > max_bytes:
            raise error(f"{path}: {what} has {size} bytes; at most {max_bytes} are accepted")


# -- YAML ------------------------------------------------------------------------------------
def _check_node_graph(node: yaml.Node, where: Path) -> None:
    """Count nodes as the constructor would expand them (aliases re-counted) and the depth."""
    count = 0
    stack: list[tuple[yaml.Node, int]] = [(node, 1)]
    while stack:
        n, depth = stack.pop()
        count += 1
        if count > MAX_YAML_NODES:
            raise ConfigError(f"{where}: the YAML document expands to more than {MAX_YAML_NODES} values "
                              "(aliases nested inside aliases?); write the values out")
        if depth > MAX_YAML_DEPTH:
            raise ConfigError(f"{where}: the YAML document is nested more than {MAX_YAML_DEPTH} levels deep")
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                stack.append((k, depth + 1))
                stack.append((v, depth + 1))
        elif isinstance(n, yaml.SequenceNode):
            stack.extend((v, depth + 1) for v in n.value)


def read_config_yaml(path: str | Path) -> Any:
    """Load a config file with ``yaml.safe_load`` after bounding its size, depth and aliases.

    Raises:
        ConfigError: not a readable regular file, larger than :data:`MAX_CONFIG_BYTES`, not
            UTF-8, invalid YAML, nested too deeply, or expanding to too many values.
    """
    p = Path(path)
    why = describe_path(p)
    if why == "does not exist":
        raise ConfigError(f"{p}: config file not found")
    require_file(p, "config file", max_bytes=MAX_CONFIG_BYTES, error=ConfigError)
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{p}: is not UTF-8 text (byte 0x{raw[exc.start]:02x} at line {line}); "
                          "save it as UTF-8") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None:
            _check_node_graph(node, p)
        return yaml.safe_load(text)
    except RecursionError:
        raise ConfigError(f"{p}: the YAML document is nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{p}: invalid YAML{at}: {getattr(exc, 'problem', None) or exc}") from None


# -- numbers ---------------------------------------------------------------------------------
def _int_in(where: str, name: str, value: Any, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: {name} must be an integer, got {value!r}")
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        raise ConfigError(f"{where}: {name} must be a whole number, got {value!r}")
    if not lo <= int(value) <= hi:
        raise ConfigError(f"{where}: {name} must be between {lo} and {hi}, got {int(value)}")


def _positive(where: str, name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{where}: {name} must be a positive finite number of seconds, got {value!r}")


def check_iterations(value: Any, *, where: str) -> None:
    """A budget of child programs: a whole number in [1, 10^9]."""
    _int_in(where, "iterations", value, 1, MAX_ITERATIONS)


def check_run_numbers(config: Any, *, where: str = "config") -> None:
    """Check the numbers of a :class:`~qdevolve.evolve.setup.config.RunConfig` (after CLI overrides).

    Raises:
        ConfigError: a value is not finite, out of range or of the wrong type.
    """
    _int_in(where, "iterations (--iterations, run.iterations)", config.iterations, 0, MAX_ITERATIONS)
    _int_in(where, "workers (--workers, run.workers)", config.workers, 1, MAX_WORKERS)
    _int_in(where, "seed (--seed, run.seed)", config.seed, 0, MAX_SEED)
    if config.wall_time_s is not None:
        _positive(where, "wall time (--wall-time, run.wall_time_s)", config.wall_time_s)
    if config.max_pending is not None:
        _int_in(where, "run.max_pending", config.max_pending, 1, 1_000_000)
    _int_in(where, "run.children_per_parent", config.children_per_parent, 1, 4096)
    limits = config.limits or {}
    for key in ("wall_s", "cpu_s"):
        if limits.get(key) is not None:
            _positive(where, f"limits.{key}", limits[key])
    for key in ("memory_mb", "processes", "output_bytes", "file_size_bytes", "open_files", "tmpfs_mb"):
        if limits.get(key) is not None:
            _int_in(where, f"limits.{key}", limits[key], 1, 2**62)
    budget = getattr(config, "budget", None) or {}
    for key in ("max_tokens",):
        if budget.get(key) is not None:
            _int_in(where, f"budget.{key}", budget[key], 1, 2**62)
    for key in ("max_cost", "max_wall_time"):
        if budget.get(key) is not None:
            _positive(where, f"budget.{key}", budget[key])


def check_plugins(config: Any) -> None:
    """Build the archive, selection and mutation plugins once; a constructor that raises
    anything becomes one :class:`ConfigError` line naming the config slot and the plugin."""
    from qdevolve import registry

    slots: list[tuple[str, Any, dict[str, Any]]] = [("archive", registry.archive, config.archive),
                                                     ("selection", registry.selection, config.selection)]
    for i, spec in enumerate(config.mutation or []):
        slots.append((f"mutation[{i}]", registry.mutation, {k: v for k, v in spec.items() if k != "weight"}))
    for slot, reg, spec in slots:
        try:
            reg.create(spec)
        except QdevolveError:
            raise
        except Exception as exc:  # noqa: BLE001 - a plugin's own error, reported on one line
            detail = " ".join(str(exc).split())[:300]
            raise ConfigError(f"{slot}: plugin '{spec.get('type')}' rejected its settings: "
                              f"{type(exc).__name__}: {detail}") from None


def check_language(example: Any, config: Any) -> None:
    """A non-Python seed cannot use the ``ast`` mutator (the default without a model)."""
    if getattr(example, "language", "python") == "python":
        return
    from qdevolve.mutation.ast_mutator import python_only_message

    ops = [m.get("type") for m in config.mutation] if config.mutation else ([] if config.backend else ["ast"])
    if "ast" in ops:
        raise ConfigError(f"{example.seed_path}: {python_only_message(example.language)}")


def check_db_target(path: Path) -> None:
    """The database's directory exists, is writable and has room (a SQLite path only)."""
    target = Path(path)
    if "://" in str(path):
        return
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.exists():
        return  # the store creates missing directories
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{target}: cannot create the database: the directory {parent} is read-only "
                          "(or not writable by this user); pass --db on a writable filesystem")
    try:
        st = os.statvfs(parent)
    except OSError:
        return
    if st.f_bavail * st.f_frsize < (1 << 20):
        raise ConfigError(f"{target}: cannot create the database: the filesystem holding {parent} is full")


def check_start(example: Any, config: Any, db: Path | None = None, *, trust: Any = None) -> list[str]:
    """Every check a new run makes before its seed is evaluated (the CLI and the API call it).

    ``trust`` (a :class:`~qdevolve.evolve.setup.trust.Trust`) is what the user vouches for of the
    example's own config; ``None`` trusts nothing of it (:mod:`qdevolve.evolve.setup.trust`).

    Returns:
        Warnings to show the user.
    """
    from qdevolve.evolve.setup.trust import check_example_trust

    check_run_numbers(config, where=str(example.config_path or "options"))
    warnings = check_example_trust(example, config, trust)
    check_language(example, config)
    check_plugins(config)
    if db is not None:
        check_db_target(db)
    from qdevolve.evolve.setup.policy_spec import policy_warnings

    return warnings + policy_warnings((config.train or {}).get("policy")) + training_pending_warnings(config)


def training_pending_warnings(config: Any) -> list[str]:
    """A trained run whose ``run.max_pending`` keeps more parent prompts in flight than the
    joined listener would (``workers / group + 1``): every generation already queued runs before
    the next trainer step, so most rollouts are sampled from an old policy version."""
    train = config.train or {}
    if not train or train.get("enabled") is False or not config.max_pending:
        return []
    per_job = int(train.get("group_size") or max(1, config.children_per_parent))
    cap = -(-max(1, config.workers) // per_job) + 1
    if config.max_pending <= cap:
        return []
    return [f"run.max_pending {config.max_pending} keeps {config.max_pending} parent prompts in flight in a trained "
            f"run: each trainer step (train.every {train.get('every', 32)}) waits for the generations queued before "
            f"it, so rollouts come from old policy versions; leave run.max_pending unset (the trained run keeps "
            f"{cap}) unless batching matters more than on-policy steps"]


PLUGIN_IMPORT_TIMEOUT_S = 60.0


def check_plugin_file(path: str | Path, *, timeout_s: float = PLUGIN_IMPORT_TIMEOUT_S) -> Path:
    """Import a ``--plugin`` file once in a child process, bounded in time, before the
    controller imports it: a file that exits, crashes or hangs at import becomes one line.

    Returns:
        The path, for :func:`qdevolve.registry.load_plugin_file`.

    Raises:
        PluginError: the file is not a readable regular file, or its import exited, failed
            or ran longer than ``timeout_s``.
    """
    import subprocess
    import sys

    from qdevolve.errors import PluginError

    p = Path(path)
    require_file(p, "plugin file", max_bytes=MAX_PROGRAM_BYTES, error=PluginError)
    probe = ("import sys, runpy\n"
             "try:\n"
             "    runpy.run_path(sys.argv[1], run_name='qdevolve_plugin_probe')\n"
             "except SystemExit as exc:\n"
             "    print(f'it called exit({exc.code!r}) while being imported', file=sys.stderr); sys.exit(3)\n"
             "except BaseException as exc:\n"
             "    print(f'{type(exc).__name__}: {exc}', file=sys.stderr); sys.exit(3)\n")
    try:
        r = subprocess.run([sys.executable, "-c", probe, str(p)], capture_output=True, text=True,
                           timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise PluginError(f"plugin file {p}: importing it did not finish within {timeout_s:g} s "
                          "(does it wait for input or loop at import time?)") from None
    if r.returncode != 0:
        last = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
        why = " ".join(last[-1].split())[:300] if last else f"exit status {r.returncode}"
        raise PluginError(f"plugin file {p} failed to import: {why}")
    return p


def sandbox_env(value: Any, *, where: str = "limits.env") -> tuple[tuple[str, str], ...]:
    """``limits.env`` of a config: a mapping added to the sandbox's default environment.

    Raises:
        ConfigError: not a mapping of variable names to strings (or numbers).
    """
    import re

    from qdevolve.sandbox.limits import DEFAULT_ENV

    if isinstance(value, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
        value = {str(k): v for k, v in value}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must map variable names to values, e.g. {{GOCACHE: /tmp/go-cache}}")
    env = dict(DEFAULT_ENV)
    for name, v in value.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ConfigError(f"{where}: {name!r} is not an environment variable name")
        if isinstance(v, bool) or not isinstance(v, (str, int, float)) or "\x00" in str(v):
            raise ConfigError(f"{where}.{name}: must be a string, got {v!r}")
        env[name] = str(v)
    return tuple(env.items())
