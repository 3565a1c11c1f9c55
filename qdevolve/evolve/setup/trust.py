"""The trust model of example directories: an example's own config shapes the search, never the host.

An example directory (its ``config.yaml``, its ``prompts/``, its seeds) may come from anyone.
Its config may choose the archive, the operators, the budgets and the prompts; it may not
change who runs what, what leaves the machine or what the controller reads or writes outside
the directory. The settings that do (the *host keys*, :func:`host_keys`) take effect only
when they come from the user:

* a config file outside the example directory (``qdevolve run DIR --config MY.yaml``);
* a command-line option that sets them (``--api-base``, ``--sandbox``);
* an explicit opt-in: ``--trust KEY`` (repeatable; ``KEY`` as the refusal names it, or a
  prefix of it such as ``sandbox``) or ``--trust-config`` (every key of this example).

Without one, :func:`check_example_trust` raises one :class:`~qdevolve.errors.ConfigError`
line naming the file and the key (exit status 2, before anything is created).
``qdevolve resume`` applies the same rules to the config it reads back from the database
(:func:`check_stored_trust`): a database is as foreign as an example directory.

The uid range of the process sandboxes is checked whoever sets it
(:func:`qdevolve.sandbox._uids.check_uid_range`), and an ``api_key_env`` that does not look
like the name of an API key gets a warning even from the user (:func:`api_key_env_warning`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qdevolve.errors import ConfigError
from qdevolve.evolve.setup.policy_spec import BUILTIN_POLICIES

__all__ = ["Trust", "host_keys", "check_example_trust", "check_stored_trust", "check_uids",
           "api_key_env_warning", "is_inside", "SAFE_SANDBOX_KEYS", "DEFAULT_API_BASE", "DEFAULT_KEY_ENV"]

#: Sandbox options an example may set; every other one acts on the host.
SAFE_SANDBOX_KEYS = frozenset({"type", "warm", "inherit_site_packages"})
#: Executor options that send work elsewhere or run setup code on the workers.
HOST_EXECUTOR_KEYS = ("address", "runtime_env", "namespace")
DEFAULT_API_BASE = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
_SANDBOX_WHY = {
    "python": "names the interpreter that runs every evaluation (as root before it drops privileges)",
    "uid_base": "chooses the host uids evaluations run as (and whose processes are killed)",
    "uid_count": "chooses the host uids evaluations run as (and whose processes are killed)",
    "extra_sys_path": "puts host directories on the sandbox's import path",
    "user": "chooses the uid the runner runs as", "candidate_user": "chooses the uid the candidate runs as",
    "idle_user": "chooses a uid the sandbox runs as", "image": "chooses the image evaluations run in",
    "runtime": "chooses the container runtime", "base_url": "sends programs and evaluator to another Docker engine",
}


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


def is_inside(path: str | Path, directory: str | Path) -> bool:
    """True when ``path``, every symlink followed, lies in ``directory`` (also resolved)."""
    real = os.path.realpath(path)
    root = os.path.realpath(directory)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _path_outside(value: Any, directory: Path | None, *, writes: bool = False, names: frozenset[str] = frozenset()) -> bool:
    """Whether a path-valued setting names a location outside the example directory.

    A bare name that is no existing path (a model hub id such as ``gpt2``) names no file, nor
    does one of ``names`` (the built-in policies, e.g. ``tiny``, whatever folders exist); an
    absolute path, ``~``, a ``..`` component or an existing relative path does.
    """
    if not isinstance(value, str) or not value or value in names:
        return False
    text = value.split(":", 1)[1] if value.startswith("vllm:") else value
    p = Path(text).expanduser()
    named = p.is_absolute() or text.startswith("~") or ".." in p.parts or writes or p.exists()
    if not named:
        return False
    if directory is None:
        return True
    return not is_inside(p if p.is_absolute() else Path.cwd() / p, directory)


def _backend_keys(prefix: str, spec: dict[str, Any], directory: Path | None) -> Iterator[tuple[str, Any, str]]:
    key_env = spec.get("api_key_env")
    if key_env not in (None, DEFAULT_KEY_ENV):
        yield f"{prefix}.api_key_env", key_env, "chooses which secret from the environment is sent as the API key"
    base = spec.get("api_base")
    if base is not None and str(base).rstrip("/") != DEFAULT_API_BASE:
        yield (f"{prefix}.api_base", base,
               f"sends the API key (${key_env or DEFAULT_KEY_ENV}) and every prompt to a server the example chose")
    for i, m in enumerate(spec.get("models") or []):
        if isinstance(m, dict):
            yield from _backend_keys(f"{prefix}.models[{i}]", {k: v for k, v in m.items() if k != "models"},
                                     directory)
    for k in ("model", "policy", "tokenizer", "model_path"):
        if spec.get("type") != "openai" and _path_outside(spec.get(k), directory,
                                                          names=BUILTIN_POLICIES if k == "policy" else frozenset()):
            yield f"{prefix}.{k}", spec[k], "loads model files from outside the example directory"
    for k in HOST_EXECUTOR_KEYS:
        if spec.get(k) is not None:
            yield f"{prefix}.{k}", spec[k], "places the policy on a cluster the example chose"


def host_keys(config: Any, directory: Path | None) -> list[tuple[str, Any, str]]:
    """``(key, value, why)`` of every setting of ``config`` that acts on the host.

    Args:
        config: A :class:`~qdevolve.evolve.setup.config.RunConfig` or its ``to_dict()``.
        directory: The example directory (paths inside it are the example's own), or
            ``None`` when there is none to compare with (every named path counts).
    """
    d = config if isinstance(config, dict) else config.to_dict()
    out: list[tuple[str, Any, str]] = []
    for k, v in (d.get("sandbox") or {}).items():
        if k not in SAFE_SANDBOX_KEYS:
            out.append((f"sandbox.{k}", v, _SANDBOX_WHY.get(k, "is a sandbox option that acts on the host")))
    limits = d.get("limits") or {}
    if limits.get("network"):
        out.append(("limits.network", limits["network"], "lets evaluations reach the network"))
    if limits.get("env"):
        env = limits["env"]
        names = ", ".join(map(str, dict(env) if isinstance(env, dict) else env))[:80]
        out.append(("limits.env", env, f"sets environment variables of the sandbox processes ({names})"))
    if limits.get("env_allow"):
        out.append(("limits.env_allow", limits["env_allow"],
                    "copies host environment variables (secrets) into the sandbox"))
    backend = d.get("backend")
    if isinstance(backend, dict):
        out.extend(_backend_keys("backend", backend, directory))
    for k in HOST_EXECUTOR_KEYS:
        if (d.get("executor_options") or {}).get(k) is not None:
            out.append((f"run.executor_options.{k}", d["executor_options"][k],
                        "sends evaluations (and the evaluator) to a cluster the example chose"))
    prompt = d.get("prompt") or {}
    if _path_outside(prompt.get("template_dir"), directory):
        out.append(("prompt.template_dir", prompt["template_dir"], "reads prompt files from outside the example directory"))
    novelty = d.get("novelty") or {}
    if _path_outside(novelty.get("model_path"), directory):
        out.append(("novelty.model_path", novelty["model_path"], "loads a model from outside the example directory"))
    train = d.get("train") or {}
    if _path_outside(train.get("policy"), directory, names=BUILTIN_POLICIES):
        out.append(("train.policy", train["policy"], "loads a policy from outside the example directory"))
    if train.get("checkpoint_dir") is not None and _path_outside(train["checkpoint_dir"], directory, writes=True):
        out.append(("train.checkpoint_dir", train["checkpoint_dir"], "writes policy weights outside the example directory"))
    cluster = train.get("cluster") if isinstance(train.get("cluster"), dict) else {}
    if isinstance(cluster.get("probe"), str):
        out.append(("train.cluster.probe", cluster["probe"], "imports a module of the example's choice into the controller"))
    if _path_outside(cluster.get("model_path"), directory):
        out.append(("train.cluster.model_path", cluster["model_path"], "loads a model from outside the example directory"))
    if isinstance(train.get("backend"), dict):
        out.extend(_backend_keys("train.backend", train["backend"], directory))
    return out


def _refusal(where: str, key: str, value: Any, why: str, *, resume: bool = False) -> ConfigError:
    shown = " ".join(repr(value).split())
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    opt = re.sub(r"\[\d+\]", "", key)
    how = (f"pass --trust {opt} (or --trust-config) to 'qdevolve resume' if you trust this database" if resume
           else f"pass --trust {opt} (or --trust-config) if you trust this directory, or set it in your own "
           "config file (--config FILE outside the directory)")
    return ConfigError(f"{where}: '{key}' ({shown}) {why}; an example directory's own config may not set it: {how}")


def check_example_trust(example: Any, config: Any, trust: Trust | None) -> list[str]:
    """Refuse the host keys an example's own config sets and the final config still uses.

    ``example.config`` is what the example's config file set; ``config`` is the run's final
    config (command-line options applied). A host key counts when the final config still
    holds the example's value: an option that replaced it is the user's. A config file outside
    the example directory is the user's own and trusted whole.

    Returns:
        Warnings to print (:func:`api_key_env_warning`).

    Raises:
        ConfigError: one line naming the file and the first refused key; or an unsafe uid range.
    """
    trust = trust or Trust()
    directory = Path(example.directory)
    cfg_path = getattr(example, "config_path", None)
    user_file = cfg_path is not None and not is_inside(cfg_path, directory)
    if not user_file:
        final = {k: v for k, v, _ in host_keys(config, directory)}
        where = str(cfg_path) if cfg_path is not None else str(directory)
        for key, value, why in host_keys(example.config, directory):
            if key in final and final[key] == value and not trust.allows(key):
                raise _refusal(where, key, value, why)
    check_uids(config, where=str(cfg_path or "options"))
    return api_key_env_warning(config)


def check_stored_trust(config: dict[str, Any], trust: Trust | None, *, where: str) -> list[str]:
    """``qdevolve resume``: the stored config's host keys need the same opt-ins as at ``run``.

    Raises:
        ConfigError: one line naming the run and the first refused key; or an unsafe uid range.
    """
    trust = trust or Trust()
    for key, value, why in host_keys(config, None):
        if not trust.allows(key):
            raise _refusal(where, key, value, why, resume=True)
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
    """Warn when ``api_key_env`` names a variable that does not look like a model API key
    (``AWS_SECRET_ACCESS_KEY``, ``GITHUB_TOKEN``, ``HOME``): its value is sent as the bearer token."""
    d = config if isinstance(config, dict) else config.to_dict()
    out = []
    specs = [("backend", d.get("backend"))]
    specs += [(f"backend.models[{i}]", m) for i, m in enumerate((d.get("backend") or {}).get("models") or [])]
    for where, spec in specs:
        name = spec.get("api_key_env") if isinstance(spec, dict) else None
        if isinstance(name, str) and (not _KEY_NAME.match(name) or _NOT_MODEL_KEYS.match(name)):
            out.append(f"{where}.api_key_env is {name!r}, which does not look like a model API key; its value "
                       "is sent as the bearer token to the backend's api_base")
    return out
