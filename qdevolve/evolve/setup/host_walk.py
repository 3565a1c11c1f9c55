"""One walk over a whole config tree: which settings act on the host (the *host keys*).

The rule reads every key and value, wherever it sits (``backend``, ``train.cluster``, a
plugin's own settings, keys no plugin has yet); it recognises shapes, not known keys, and
denies by default:

* **a path** (any string naming an existing file, an absolute path, ``~``, a ``..`` component;
  any value of a key whose name says it is a path, such as ``*_dir``): resolved with every
  symlink followed, it may not leave the example directory; a directory it names may hold
  no file that does (a symlinked prompt under ``prompt.template_dir``);
* **a server**: a key named like one (``api_base``, ``*_url``, ``host``, ``address``,
  ``endpoint``, ``proxy``, ``port``...) or a value shaped like one (``scheme://...``,
  ``host:port``);
* **a secret**: a key named like one (``api_key``, ``*_key_env``, ``token``, ``password``,
  ``secret``, ``credential``...) or a value that reads the environment (``${VAR}``, ``$VAR``);
* **a pool** (``run.budget_pool``, ``run.pool_migration``, any ``*pool*`` key);
* **a uid** (``uid``, ``gid``, ``user``), **an interpreter** (``python``, ``executable``,
  ``command``, ``shell``...), **environment passthrough** (``env``, ``*_env``, ``environment``),
  **network** (``network`` set to a true value), **code loading** (``plugin``, ``probe``,
  ``module``, ``hook``, ``sys_path``...), **placement** (``namespace``);
* **the sandbox**: every option but ``type``, ``warm`` and ``inherit_site_packages``, and a
  ``type`` that isolates less than the default (``local`` where ``auto`` picks ``bwrap``, or a
  backend of unknown strength). Asking for more isolation (``docker``) is the example's right.

A key found is reported once, at the highest level (``limits.env``, not each variable under it).
Two values are exempt because they name no host resource: ``api_key_env: OPENAI_API_KEY`` and
``api_base`` equal to OpenAI's default, and model names under a remote (``openai``) backend.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["walk_host_keys", "sandbox_rank", "SANDBOX_RANK", "SAFE_SANDBOX_KEYS", "DEFAULT_API_BASE",
           "DEFAULT_KEY_ENV", "RUN_FIELDS", "is_inside"]

#: Sandbox options an example may set; every other one acts on the host.
SAFE_SANDBOX_KEYS = frozenset({"type", "warm", "inherit_site_packages"})
#: Isolation of the sandbox backends, weakest first (docs/sandbox.md's table).
SANDBOX_RANK = {"local": 0, "bwrap": 1, "docker": 2}
DEFAULT_API_BASE = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
#: RunConfig fields that the config file writes under ``run:`` (named ``run.<field>``).
RUN_FIELDS = frozenset({"iterations", "seed", "workers", "wall_time_s", "max_pending", "children_per_parent",
                        "max_duplicate_streak", "fail_fast_children", "name", "executor", "executor_options",
                        "budget_pool", "pool_migration"})
MAX_DIR_FILES = 10_000  # files looked at under one directory a config names

_SANDBOX_WHY = {
    "python": "names the interpreter that runs every evaluation (as root before it drops privileges)",
    "uid_base": "chooses the host uids evaluations run as (and whose processes are killed)",
    "uid_count": "chooses the host uids evaluations run as (and whose processes are killed)",
    "extra_sys_path": "puts host directories on the sandbox's import path",
    "user": "chooses the uid the runner runs as", "candidate_user": "chooses the uid the candidate runs as",
    "idle_user": "chooses a uid the sandbox runs as", "image": "chooses the image evaluations run in",
    "runtime": "chooses the container runtime", "base_url": "sends programs and evaluator to another Docker engine",
}
# Key names, split into words at '_', '-' and '.'.
_SERVER_WORDS = frozenset({"url", "urls", "uri", "uris", "host", "hosts", "hostname", "address", "addresses", "addr",
                           "endpoint", "endpoints", "server", "servers", "proxy", "dsn", "webhook", "port",
                           "socket"})
_SECRET_WORDS = frozenset({"apikey", "token", "password", "passwd", "passphrase", "secret", "secrets",
                           "credential", "credentials", "auth", "bearer", "cookie"})
_UID_WORDS = frozenset({"uid", "gid", "uids", "gids"})
_INTERPRETER_WORDS = frozenset({"python", "interpreter", "executable", "exe", "binary", "shell", "command", "cmd",
                                "argv", "entrypoint", "launcher"})
_ENV_WORDS = frozenset({"env", "environ", "environment", "envs"})
_NETWORK_WORDS = frozenset({"network", "networking", "internet", "net"})
_CODE_WORDS = frozenset({"plugin", "plugins", "probe", "module", "modules", "import", "imports", "hook", "hooks",
                         "callback", "callbacks", "factory", "loader"})
_PATH_WORDS = frozenset({"dir", "dirs", "directory", "path", "paths", "file", "files", "folder", "checkpoint",
                         "output", "save", "cache", "log"})
_LOADS_BY_NAME = frozenset({"policy", "model", "tokenizer", "weights", "adapter", "encoder"})
_URL_VALUE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://\S*$")
_HOST_PORT_VALUE = re.compile(r"^[A-Za-z0-9.-]+:\d{2,5}$|^\[[0-9A-Fa-f:]+\]:\d{2,5}$")
_ENV_VALUE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|^\$([A-Za-z_][A-Za-z0-9_]*)$")
_SCHEME_PATH = re.compile(r"^[a-z]+:(?=[/~.])")  # vllm:/models/x
_USER_VALUE = re.compile(r"^[\w.-]{1,64}(:[\w.-]{1,64})?$")


def is_inside(path: str | Path, directory: str | Path) -> bool:
    """True when ``path``, every symlink followed, lies in ``directory`` (also resolved)."""
    real = os.path.realpath(path)
    root = os.path.realpath(directory)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def sandbox_rank(kind: Any) -> int | None:
    """The isolation rank of a sandbox type (``auto`` is what it resolves to here); ``None``: unknown."""
    if kind in (None, "auto"):
        from qdevolve.sandbox import best_available

        kind = best_available()
    return SANDBOX_RANK.get(str(kind))


def _words(name: str) -> set[str]:
    return {w for w in re.split(r"[_\-.\s]+", name.lower()) if w}


def _named_path(text: str, *, bare_names: bool) -> Path | None:
    """The path a string names, if it is shaped like one; else ``None``.

    A bare word (no ``/``) names a file only under a key that loads files by name
    (``bare_names``: ``policy``, ``model``...), and only when it exists; elsewhere it is a
    plugin or metric name, whatever the working directory holds.
    """
    if not text or len(text) > 4096 or "\n" in text or "\x00" in text:
        return None
    text = _SCHEME_PATH.sub("", text, count=1)
    p = Path(text).expanduser()
    try:
        named = p.is_absolute() or text.startswith("~") or ".." in p.parts
        if not named and ("/" in text or bare_names):
            named = p.exists() or os.path.islink(p)
    except OSError:
        return None
    return p if named else None


def _outside(p: Path, directory: Path | None) -> str | None:
    """Where ``p`` (or a file under it) leads out of ``directory``; ``None`` when it stays inside."""
    if directory is None:
        return str(p)
    full = p if p.is_absolute() else Path.cwd() / p
    if not is_inside(full, directory):
        return os.path.realpath(full)
    if full.is_dir():
        for n, (root, dirs, files) in enumerate(os.walk(full, followlinks=False)):
            for name in [*files, *dirs]:
                f = Path(root) / name
                if not is_inside(f, directory):
                    return f"{f} -> {os.path.realpath(f)}"
            if n > MAX_DIR_FILES:
                return f"{full} (more than {MAX_DIR_FILES} entries to check)"
    return None


def _builtin_names() -> frozenset[str]:
    """Names that load no file of the example's choosing: built-in policies and known models."""
    from qdevolve.backends.models import KNOWN_MODELS
    from qdevolve.evolve.setup.policy_spec import BUILTIN_POLICIES

    return BUILTIN_POLICIES | frozenset(KNOWN_MODELS)


def _path_finding(key: str, name: str, value: str, directory: Path | None) -> str | None:
    """Why a string value names a path outside the example directory (``None``: it does not)."""
    words = _words(name)
    pathlike = bool(words & _PATH_WORDS) or name.endswith(("_dir", "_path", "_file"))
    if words & _LOADS_BY_NAME and not pathlike and value in _builtin_names():
        return None  # a built-in policy or known model is a name, whatever folder cwd holds
    p = _named_path(value, bare_names=pathlike or bool(words & _LOADS_BY_NAME))
    if p is None and directory is not None and not _SCHEME_PATH.match(value) and len(value) < 4096 \
            and "\n" not in value and "\x00" not in value:
        try:
            inner = directory / value
            if inner.exists() or os.path.islink(inner):  # relative to the example: links out count
                where = _outside(inner, directory)
                if where is not None:
                    return f"names a path that leads outside the example directory ({where})"
        except (OSError, ValueError):
            pass
    if p is None and pathlike and value.strip() and not _URL_VALUE.match(value):
        p = Path(value).expanduser()  # a path key: a file to be written or read, existing or not
    if p is None:
        return None
    where = _outside(p, directory)
    if where is None:
        return None
    return f"names a path outside the example directory ({where})"


def _leaf_finding(key: str, name: str, value: Any, directory: Path | None, *, model_names: bool) -> str | None:
    """Why one setting acts on the host, by its key name and its value's shape."""
    if value is None or value is False or value == "" or value == [] or value == {}:
        return None
    words = _words(name)
    lname = name.lower()
    if lname.endswith("api_key_env") and value == DEFAULT_KEY_ENV:
        return None
    if lname.endswith("api_base") and str(value).rstrip("/") == DEFAULT_API_BASE:
        return None
    if lname.endswith(("api_base", "base_url")) or words & _SERVER_WORDS:
        return f"names a server ({_short(value)}) that prompts, programs or keys would be sent to"
    if "api_key" in lname or lname.endswith(("_key_env", "access_key", "private_key", "secret_key")) \
            or words & _SECRET_WORDS:
        return f"chooses a secret ({_short(value)}) and where it is sent"
    if "pool" in lname:
        return "joins a pool shared with other runs (its budget and its programs)"
    if words & _UID_WORDS or ((lname == "user" or lname.endswith("_user"))
                              and (isinstance(value, int) or _USER_VALUE.match(str(value)))):
        return "chooses a host uid"
    if words & _INTERPRETER_WORDS:
        return "names an interpreter or command that runs on the host"
    if words & _ENV_WORDS or lname.endswith("_env"):
        return "passes environment variables (secrets) to the processes it starts"
    if words & _NETWORK_WORDS:
        return "lets processes reach the network"
    if (words & _CODE_WORDS or "sys_path" in lname) and isinstance(value, (str, list)):
        return "imports code of the example's choice into the controller"
    if "namespace" in words:
        return "places work in a cluster namespace the example chose"
    for text in _strings(value):
        m = _ENV_VALUE.search(text)
        if m:
            return f"reads the environment variable ${m.group(1) or m.group(2)}"
        if _URL_VALUE.match(text) or _HOST_PORT_VALUE.match(text):
            return f"names a server ({_short(text)})"
        if lname in ("type", "executor") or (model_names and lname in ("model", "name", "models", "tokenizer")):
            continue  # a plugin name, or a remote server's model name: not a file
        why = _path_finding(key, name, text, directory)
        if why is not None:
            return why
    return None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


def _short(value: Any) -> str:
    text = " ".join(repr(value).split()) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


def _walk(prefix: str, node: Any, directory: Path | None, *, model_names: bool) -> Iterator[tuple[str, Any, str]]:
    if isinstance(node, dict):
        remote = model_names or node.get("type") == "openai" or bool(node.get("api_base"))
        for k, v in node.items():
            name = str(k)
            key = f"{prefix}.{name}" if prefix else name
            why = _leaf_finding(key, name, v, directory, model_names=remote)
            if why is not None:
                yield key, v, why
            elif isinstance(v, (dict, list)):
                yield from _walk(key, v, directory, model_names=remote)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            key = f"{prefix}[{i}]"
            if isinstance(v, (dict, list)):
                yield from _walk(key, v, directory, model_names=model_names)


def _sandbox(spec: Any, directory: Path | None) -> Iterator[tuple[str, Any, str]]:
    if not isinstance(spec, dict):
        return
    for k, v in spec.items():
        if k not in SAFE_SANDBOX_KEYS:
            yield f"sandbox.{k}", v, _SANDBOX_WHY.get(str(k), "is a sandbox option that acts on the host")
    kind = spec.get("type", "auto")
    rank, default = sandbox_rank(kind), sandbox_rank("auto")
    if rank is None or default is None or rank < default:
        from qdevolve.sandbox import best_available

        yield ("sandbox.type", kind, f"isolates evaluations less than the default sandbox ({best_available()}); "
               "an example may ask for more isolation, never less")


def walk_host_keys(config: dict[str, Any], directory: Path | None) -> list[tuple[str, Any, str]]:
    """``(key, value, why)`` for every host key of a config dict (a ``RunConfig.to_dict()``).

    Keys are named as the config file writes them: ``run.budget_pool``,
    ``backend.models[0].api_base``, ``train.cluster.api_key_env``.
    """
    out: list[tuple[str, Any, str]] = []
    for top, value in config.items():
        if top in ("warnings",):
            continue
        if top == "sandbox":
            out.extend(_sandbox(value, directory))
            continue
        key = f"run.{top}" if top in RUN_FIELDS else str(top)
        why = _leaf_finding(key, str(top), value, directory, model_names=False)
        if why is not None:
            out.append((key, value, why))
        elif isinstance(value, (dict, list)):
            out.extend(_walk(key, value, directory, model_names=False))
    return out
