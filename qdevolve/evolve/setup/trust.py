"""The trust model of example directories: an example's own config shapes the search, never the host.

An example directory (its ``config.yaml``, its ``prompts/``, its seeds) may come from anyone.
Its config may choose the archive, the operators, the budgets and the prompts; it may not
change who runs what, what leaves the machine or what the controller reads or writes outside
the directory. The settings that do (the *host keys*, :func:`host_keys`) take effect only
when they come from the user:

* a config file outside the example directory (``qdevolve run DIR --config MY.yaml``);
* a command-line option that sets them (``--api-base``, ``--sandbox``);
* the user's trust store: ``qdevolve trust DIR`` records the directory's config and prompt
  files by hash; runs honour its host keys until one of them changes
  (:mod:`qdevolve.evolve.setup.trust_store`, :mod:`qdevolve.evolve.setup.consent`);
* an explicit opt-in: ``--trust KEY`` (repeatable; ``KEY`` as the refusal names it, or a
  prefix of it such as ``sandbox``) or ``--trust-config`` (every key of this example);
* a yes to the one question a run on a terminal asks.

Which settings are host keys is one rule over the whole config tree, not a list of known
keys (:mod:`qdevolve.evolve.setup.host_walk`). A host key that would take no effect (a
``backend.api_base`` when no model is used) is a warning, never a refusal
(:func:`~qdevolve.evolve.setup.consent.settle_trust`). Otherwise :func:`check_example_trust`
raises one :class:`~qdevolve.errors.ConfigError` line naming the file and every refused key
(exit status 2, before anything is created). ``qdevolve resume`` applies the same rules to
the config it reads back from the database (:func:`check_stored_trust`): a database is as
foreign as an example directory.

The uid range of the process sandboxes is checked whoever sets it
(:func:`qdevolve.sandbox._uids.check_uid_range`), and an ``api_key_env`` that does not look
like the name of an API key gets a warning even from the user (:func:`api_key_env_warning`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qdevolve.errors import ConfigError
from qdevolve.evolve.setup.host_walk import (
    DEFAULT_API_BASE,
    DEFAULT_KEY_ENV,
    SAFE_SANDBOX_KEYS,
    is_inside,
    walk_host_keys,
)

__all__ = ["Trust", "host_keys", "check_example_trust", "check_stored_trust", "check_uids", "model_used",
           "refused_keys", "refusal", "api_key_env_warning", "is_inside", "SAFE_SANDBOX_KEYS", "DEFAULT_API_BASE", "DEFAULT_KEY_ENV"]

#: Host keys a stored run keeps on resume: the sandbox type it was started with (the user's
#: --sandbox, or an example's type trusted then), and its budget pool, which lives in the
#: database being resumed (a database can only join its own runs' pools).
RESUME_KEEPS = frozenset({"sandbox.type", "run.budget_pool", "run.pool_migration"})
#: Config sections that act only through the model: a host key under them takes no effect
#: when no model is used (``--mutation ast``), and is then a warning.
MODEL_SECTIONS = ("backend", "prompt")


@dataclass(frozen=True)
class Trust:
    """What the user vouches for: every key (``everything``) or the keys named in ``keys``.

    A name trusts the key it names and every key beneath it (``sandbox`` trusts
    ``sandbox.python``); list indices are ignored (``backend.models.api_base``).
    """

    everything: bool = False
    keys: frozenset[str] = frozenset()

    @classmethod
    def of(cls, *, everything: bool = False, keys: Iterable[str] = ()) -> Trust:
        """From the command line: ``--trust-config`` and the ``--trust KEY[,KEY]`` values."""
        names = {k.strip() for item in keys for k in str(item).split(",") if k.strip()}
        return cls(everything=everything, keys=frozenset(names))

    def allows(self, key: str) -> bool:
        if self.everything:
            return True
        plain = re.sub(r"\[\d+\]", "", key)
        return any(k in (key, plain) or plain.startswith(k + ".") or key.startswith(k + ".") for k in self.keys)


def host_keys(config: Any, directory: Path | None) -> list[tuple[str, Any, str]]:
    """``(key, value, why)`` of every setting of ``config`` that acts on the host: one walk over
    the whole tree (:func:`~qdevolve.evolve.setup.host_walk.walk_host_keys`).

    Args:
        config: A :class:`~qdevolve.evolve.setup.config.RunConfig` or its ``to_dict()``.
        directory: The example directory (paths inside it are the example's own), or
            ``None`` when there is none to compare with (every named path counts).
    """
    d = config if isinstance(config, dict) else config.to_dict()
    return walk_host_keys(d, Path(directory) if directory is not None else None)


def model_used(config: Any) -> bool:
    """Whether a run of ``config`` generates with a model (its ``backend``, a policy, an agent).

    A run uses one when it trains (``train``), when an executor plugin drives agents (any
    executor but ``local``/``ray``), when no operator is listed but a backend is (the model
    operators are then the default), or when a listed operator needs a backend (an operator
    the registry does not know counts as one).
    """
    d = config if isinstance(config, dict) else config.to_dict()
    if d.get("train") or d.get("executor", "local") not in ("local", "ray"):
        return True
    ops = d.get("mutation") or []
    if not ops:
        return bool(d.get("backend"))
    from qdevolve import registry

    for op in ops:
        try:
            cls = registry.mutation.get(str(op.get("type")))
        except Exception:  # noqa: BLE001 - an unknown operator: assume the worst
            return True
        if getattr(cls, "needs_backend", True):
            return True
    return False


def _shown(value: Any) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= 60 else text[:57] + "..."


def refusal(where: str, found: list[tuple[str, Any, str]], *, resume: bool = False,
             directory: Path | None = None) -> ConfigError:
    """One line naming every refused key, what it would do, and the ways to grant it."""
    parts = [f"'{key}' ({_shown(value)}) {why}" for key, value, why in found]
    opts = ",".join(dict.fromkeys(re.sub(r"\[\d+\]", "", key) for key, _v, _w in found))
    if resume:
        how = f"pass --trust {opts} (or --trust-config) to 'qdevolve resume' if you trust this database"
    else:
        how = (f"if you trust this directory, run 'qdevolve trust {directory or 'DIR'}' once, or pass --trust {opts} "
               "(or --trust-config), or set these in your own config file (--config FILE outside the directory)")
    return ConfigError(f"{where}: {'; '.join(parts)}; an example directory's own config may not set "
                       f"{'this' if len(found) == 1 else 'these'}: {how}")


def refused_keys(example: Any, config: Any, trust: Trust | None) -> list[tuple[str, Any, str]]:
    """The host keys the example's own config set, the final ``config`` still holds, and
    ``trust`` does not allow (none for a config file outside the example directory)."""
    trust = trust or Trust()
    directory = Path(example.directory)
    cfg_path = getattr(example, "config_path", None)
    if cfg_path is not None and not is_inside(cfg_path, directory):
        return []
    final = {k: v for k, v, _ in host_keys(config, directory)}
    return [(key, value, why) for key, value, why in host_keys(example.config, directory)
            if key in final and final[key] == value and not trust.allows(key)]


def check_example_trust(example: Any, config: Any, trust: Trust | None) -> list[str]:
    """Refuse the host keys an example's own config sets and the final config still uses.

    ``example.config`` is what the example's config file set; ``config`` is the run's final
    config (command-line options applied). A host key counts when the final config still
    holds the example's value: an option that replaced it is the user's. A config file outside
    the example directory is the user's own and trusted whole.

    Returns:
        Warnings to print (:func:`api_key_env_warning`).

    Raises:
        ConfigError: one line naming the file and every refused key; or an unsafe uid range.
    """
    cfg_path = getattr(example, "config_path", None)
    found = refused_keys(example, config, trust)
    if found:
        raise refusal(str(cfg_path or example.directory), found, directory=Path(example.directory))
    check_uids(config, where=str(cfg_path or "options"))
    return api_key_env_warning(config)


def check_stored_trust(config: dict[str, Any], trust: Trust | None, *, where: str) -> list[str]:
    """``qdevolve resume``: the stored config's host keys need the same opt-ins as at ``run``.

    Raises:
        ConfigError: one line naming the run and every refused key; or an unsafe uid range.
    """
    trust = trust or Trust()
    found = [(k, v, why) for k, v, why in host_keys(config, None) if not trust.allows(k) and k not in RESUME_KEEPS]
    if found:
        raise refusal(where, found, resume=True)
    check_uids(config, where=where)
    return api_key_env_warning(config)


def check_uids(config: Any, *, where: str) -> None:
    """The sandbox's uid range, whoever set it (:func:`~qdevolve.sandbox._uids.check_uid_range`)."""
    d = config if isinstance(config, dict) else config.to_dict()
    sandbox = d.get("sandbox") or {}
    if "uid_base" not in sandbox and "uid_count" not in sandbox:
        return
    from qdevolve.sandbox._uids import check_uid_range

    why = check_uid_range(sandbox.get("uid_base", 62000), sandbox.get("uid_count", 2048))
    if why is not None:
        raise ConfigError(f"{where}: sandbox.uid_base/uid_count: {why}")


_KEY_NAME = re.compile(r"(?i)^[A-Z0-9_]*(API_?KEY|_KEY|_TOKEN)$")
_NOT_MODEL_KEYS = re.compile(r"(?i)^(AWS|AZURE_CLIENT|GITHUB|GH|GITLAB|SSH|GPG|GNUPG|NPM|PYPI|TWINE|DOCKER|"
                             r"KUBE|VAULT|SLACK|STRIPE|DATABASE|PG|MYSQL|REDIS|GCP_SERVICE|GOOGLE_APPLICATION)")


def api_key_env_warning(config: Any) -> list[str]:
    """Warn when an ``api_key_env`` (anywhere in the tree) names a variable that does not look
    like a model API key (``AWS_SECRET_ACCESS_KEY``, ``GITHUB_TOKEN``, ``HOME``): its value is
    sent as the bearer token."""
    d = config if isinstance(config, dict) else config.to_dict()
    out = []
    stack: list[tuple[str, Any]] = [("", d)]
    while stack:
        where, node = stack.pop(0)
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            key = f"{where}[{k}]" if isinstance(k, int) else (f"{where}.{k}" if where else str(k))
            if isinstance(v, (dict, list)):
                stack.append((key, v))
            elif str(k).endswith("api_key_env") and isinstance(v, str) and (
                    not _KEY_NAME.match(v) or _NOT_MODEL_KEYS.match(v)):
                out.append(f"{key} is {v!r}, which does not look like a model API key; its value "
                           "is sent as the bearer token to the api_base beside it")
    return out
