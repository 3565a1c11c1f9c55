"""What a run of an example directory needs the user to agree to, and how it is asked.

The trust rule (:mod:`qdevolve.evolve.setup.trust`) finds the host keys an example's own
config sets. This module decides what happens to them, as direnv and VS Code's workspace
trust do, so that a user can live with it:

1. **The trust store** (:mod:`qdevolve.evolve.setup.trust_store`): a directory recorded with
   ``qdevolve trust DIR`` whose config and prompt files are unchanged is trusted whole; the
   run says so in one line. A recorded directory whose files changed is not, and the run says
   which file changed.
2. **No effect, no refusal**: a host key that would take no effect (``backend.api_base`` or
   ``backend.api_key_env`` when no model is used, e.g. ``--mutation ast``) is one warning
   line, and the setting is dropped from the run's config so it cannot take effect later.
3. **Asking once**: on a terminal, a run that needs trust asks one yes/no question naming
   what would leave the machine (each server and secret variable) and records a yes in the
   store; elsewhere it exits 2 with one line naming the keys and the ways to grant them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from qdevolve.evolve.setup.host_walk import DEFAULT_API_BASE, DEFAULT_KEY_ENV
from qdevolve.evolve.setup.trust import (
    MODEL_SECTIONS,
    Trust,
    host_keys,
    model_used,
    refusal,
    refused_keys,
)
from qdevolve.evolve.setup.trust_store import TrustStore

__all__ = ["Settled", "trust_from_store", "stored_trust_from_store", "directory_host_keys", "settle_trust",
           "what_leaves", "question"]


@dataclass(frozen=True)
class Settled:
    """The run's config after the trust decision, the trust it runs with and lines to print."""

    config: Any
    trust: Trust
    warnings: tuple[str, ...] = ()


def trust_from_store(directory: str | Path, trust: Trust | None,
                     store: TrustStore | None = None) -> tuple[Trust, list[str]]:
    """The command line's ``trust`` widened by the store's entry for ``directory``, and the
    line to print (trusted from the store, or trust revoked by a change)."""
    trust = trust or Trust()
    store = store or TrustStore()
    status = store.status(directory)
    if status.state == "trusted":
        return (replace(trust, everything=True),
                [f"trusted: {status.directory} runs with the trust recorded in {store.path} "
                 f"('qdevolve trust --revoke {status.directory}' to withdraw it)"])
    if status.state == "changed":
        return trust, [f"trust revoked: {status.directory}: {status.detail} since 'qdevolve trust'; "
                       f"its config is not trusted until you run 'qdevolve trust {status.directory}' again"]
    return trust, []


def stored_trust_from_store(config: dict[str, Any], example_dir: str | None, trust: Trust | None,
                            store: TrustStore | None = None) -> tuple[Trust, list[str]]:
    """``qdevolve resume``: the stored config's host keys that the run's example directory,
    trusted in the store and unchanged, sets to the same value are trusted again (a run
    started with ``qdevolve trust DIR`` resumes without a flag); any other stays refused."""
    trust = trust or Trust()
    if not example_dir or not Path(example_dir).is_dir():
        return trust, []
    widened, notes = trust_from_store(example_dir, None, store)
    if not widened.everything:
        return trust, [n for n in notes if n.startswith("trust revoked:")]
    own = {k: v for k, v, _w in directory_host_keys(example_dir)[1]}
    same = [k for k, v, _w in host_keys(config, None) if k in own and own[k] == v]
    return replace(trust, keys=trust.keys | frozenset([*same, "symlinks"])), notes


def directory_host_keys(directory: str | Path) -> tuple[Any, list[tuple[str, Any, str]]]:
    """The config of an example directory's own config file (``None`` without one) and its host keys."""
    from qdevolve.evolve.setup.config import load_config
    from qdevolve.evolve.setup.example import CONFIG_NAMES

    d = Path(directory)
    cfg = next((d / n for n in CONFIG_NAMES if (d / n).is_file()), None)
    if cfg is None:
        return None, []
    config = load_config(cfg)
    return config, host_keys(config, d)


def what_leaves(found: list[tuple[str, Any, str]], config: Any) -> list[str]:
    """Plain statements of what the keys ``found`` would send off the machine or change on it."""
    d = config if isinstance(config, dict) else config.to_dict()
    out: list[str] = []
    for key, value, why in found:
        name = key.rsplit(".", 1)[-1]
        if name.endswith(("api_base", "base_url")):
            env = _sibling(d, key, "api_key_env") or DEFAULT_KEY_ENV
            out.append(f"every prompt and the secret in ${env} go to {value}")
        elif name.endswith("api_key_env"):
            if any(k == key[: -len("api_key_env")] + "api_base" for k, _v, _w in found):
                continue  # said with its api_base
            base = _sibling(d, key, "api_base") or DEFAULT_API_BASE
            out.append(f"the secret in ${value} is sent as the bearer token to {base}")
        else:
            out.append(f"{key} = {value!r}: {why}")
    return out


def _sibling(d: dict[str, Any], key: str, name: str) -> Any:
    """The value of ``name`` beside ``key`` in the config dict (``None`` if absent)."""
    import re

    node: Any = d
    parts = key.split(".")[:-1]
    if parts and parts[0] == "run":
        parts = parts[1:]
    for part in parts:
        m = re.fullmatch(r"(.+?)((?:\[\d+\])*)", part)
        node = node.get(m.group(1)) if isinstance(node, dict) else None
        for idx in re.findall(r"\[(\d+)\]", m.group(2)):
            node = node[int(idx)] if isinstance(node, list) and int(idx) < len(node) else None
    return node.get(name) if isinstance(node, dict) else None


def question(directory: Path, found: list[tuple[str, Any, str]], config: Any, store: TrustStore) -> str:
    """The one question a terminal run asks."""
    lines = [f"{directory}: this example's own config asks for settings that act on this machine:"]
    lines += [f"  - {s}" for s in what_leaves(found, config)]
    lines.append(f"Trust this directory? (recorded in {store.path} until its config or prompt files change)")
    return "\n".join(lines)


def settle_trust(example: Any, config: Any, trust: Trust | None, *, store: TrustStore | None = None,
                 ask: Callable[[str], bool] | None = None) -> Settled:
    """Decide the example's host keys for a new run (module docstring).

    Args:
        example: The loaded :class:`~qdevolve.evolve.setup.example.Example`.
        config: The run's final config (command-line options applied).
        trust: What the command line vouches for (with the store's entry already applied,
            :func:`trust_from_store`).
        store: The trust store a yes is recorded in.
        ask: Asks the user a yes/no question (a terminal); ``None``: nobody to ask.

    Returns:
        The config to run (settings without effect removed), the trust to run with and the
        warnings to print.

    Raises:
        ConfigError: host keys that would take effect, not granted (one line, exit status 2).
    """
    trust = trust or Trust()
    found = refused_keys(example, config, trust)
    warnings: list[str] = []
    idle = [f for f in found if f[0].split(".")[0].split("[")[0] in MODEL_SECTIONS] if not model_used(config) else []
    if idle:
        where = str(example.config_path or example.directory)
        names = ", ".join(f"{k} ({v!r})" for k, v, _w in idle)
        warnings.append(f"{where}: {names} take{'s' if len(idle) == 1 else ''} no effect: no model is used "
                        f"(mutation: {', '.join(m.get('type', '?') for m in config.mutation) or 'ast'}); "
                        "ignored. To generate with this model, run "
                        f"'qdevolve trust {example.directory}' or pass --trust backend")
        config = _without(config, [k for k, _v, _w in idle])
        found = [f for f in found if f not in idle]
    if found and ask is not None:
        store = store or TrustStore()
        if ask(question(Path(example.directory), found, config, store)):
            store.grant(example.directory)
            trust = replace(trust, everything=True)
            warnings.append(f"trusted: {example.directory} recorded in {store.path}")
            found = []
    if found:
        raise refusal(str(example.config_path or example.directory), found, directory=Path(example.directory))
    return Settled(config, trust, tuple(warnings))


def _without(config: Any, keys: list[str]) -> Any:
    """``config`` without the model sections' settings ``keys`` (a backend goes whole)."""
    over: dict[str, Any] = {}
    if any(k.startswith("backend") for k in keys):
        config = replace(config, backend=None)
    prompt_keys = {k.split(".")[1].split("[")[0] for k in keys if k.startswith("prompt.")}
    if prompt_keys:
        over["prompt"] = {k: v for k, v in config.prompt.items() if k not in prompt_keys}
    return replace(config, **over) if over else config
