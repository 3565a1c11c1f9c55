"""One registry per plugin kind: decorators, entry points and ``--plugin FILE``.

Usage::

    from qdevolve import registry

    @registry.selection("my_rule")
    class MyRule:
        def select(self, candidates, rng, n=1): ...

    rule = registry.selection.create({"type": "my_rule", "temperature": 0.5})

Installed packages expose plugins through the entry-point groups ``qdevolve.<kind>``
(``qdevolve`` itself registers its core plugins that way, like any third party); local files
are loaded with :func:`load_plugin_file` (the CLI's ``--plugin FILE``), which returns the
file's SHA-256 so a run can record it. Entry points are listed without importing them and
loaded on first use; a broken one is reported with its distribution name and never breaks
other plugins. This module imports nothing else from qdevolve but its errors.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from qdevolve.errors import PluginError

__all__ = [
    "KINDS",
    "PROTOCOLS",
    "Registry",
    "PluginInfo",
    "PluginFile",
    "REGISTRIES",
    "archive",
    "selection",
    "mutation",
    "backend",
    "sandbox",
    "objective",
    "cluster",
    "executor",
    "prompt_mutator",
    "load_plugin_file",
    "all_plugins",
    "snapshot",
]

# Each kind's protocol: every inner tuple lists alternatives, one of which must be present.
PROTOCOLS: dict[str, tuple[tuple[str, ...], ...]] = {
    "archive": (("add",), ("sample",), ("elites",), ("stats",)),
    "selection": (("select",),),
    "mutation": (("propose",),),
    "backend": (("generate",),),
    "sandbox": (("evaluate",),),
    "objective": (("advantages", "update"),),
    "cluster": (("__call__",),),
    "executor": (("submit",), ("close",)),
    "prompt_mutator": (("mutate",),),  # a new prompt template from an old one (qdevolve.mutation.template_mutators)
}
KINDS: tuple[str, ...] = tuple(PROTOCOLS)


@dataclass(frozen=True)
class PluginInfo:
    """One row of ``qdevolve plugins list``."""

    kind: str
    name: str
    source: str
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {"kind": self.kind, "name": self.name, "source": str(self.source)}
        if self.error:
            d["error"] = self.error
        return d


@dataclass(frozen=True)
class PluginFile:
    """A local plugin file loaded with ``--plugin``; recorded in the run with its hash."""

    path: str
    sha256: str
    names: tuple[tuple[str, str], ...]  # (kind, name) pairs it registered


@dataclass
class _Entry:
    obj: Any
    source: str | _CallerSource  # an entry point's or file's text, or a registering module


def _check_protocol(kind: str, name: str, obj: Any, source: object) -> None:
    """Raise :class:`PluginError` when ``obj`` lacks a method its kind requires."""
    target = obj
    if kind == "cluster":
        if not callable(obj):
            raise PluginError(f"cluster plugin '{name}' from {source} is not callable")
        return
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        return  # a factory: checked on the instance it returns, in create()
    missing = [" or ".join(alts) for alts in PROTOCOLS[kind] if not any(hasattr(target, a) for a in alts)]
    if missing:
        raise PluginError(
            f"{kind} plugin '{name}' from {source} does not follow the {kind} protocol: "
            f"missing {', '.join(missing)}; see docs/plugins.md"
        )


class _CallerSource:
    """Where a plugin was registered in code: ``module (file) of distribution D`` once shown.

    Not a ``str``: its text needs the distribution, looked up only when it is shown
    (``str()``, f-strings, ``plugins list``), because the first lookup reads every installed
    distribution's metadata (about a second), which every command would pay at start.
    """

    __slots__ = ("module", "file")

    def __init__(self, module: str, file: str) -> None:
        self.module, self.file = module, file

    def __str__(self) -> str:
        if self.module == "__main__":
            return self.file
        dists = _distributions_of(self.module.split(".")[0])
        return f"{self.module} ({self.file})" + (f" of distribution {', '.join(dists)}" if dists else "")


def _caller_source(depth: int = 2) -> _CallerSource:
    # sys._getframe, not inspect.stack(): the latter reads every frame's source (~0.1 s a call)
    frame = sys._getframe(depth)
    return _CallerSource(frame.f_globals.get("__name__", "?"), frame.f_code.co_filename)


_PACKAGES: dict[str, list[str]] | None = None


def _distributions_of(top_level: str) -> list[str]:
    """Installed distributions providing a top-level package (cached once per process)."""
    global _PACKAGES
    if _PACKAGES is None:
        try:
            _PACKAGES = {k: list(v) for k, v in metadata.packages_distributions().items()}
        except Exception:  # pragma: no cover - broken metadata on the machine
            _PACKAGES = {}
    return list(dict.fromkeys(_PACKAGES.get(top_level, [])))


class Registry:
    """Plugins of one kind, by name."""

    def __init__(self, kind: str) -> None:
        if kind not in PROTOCOLS:
            raise ValueError(f"unknown plugin kind {kind!r}; kinds are {', '.join(KINDS)}")
        self.kind = kind
        self.group = f"qdevolve.{kind}"
        self._entries: dict[str, _Entry] = {}
        self._entry_points: dict[str, metadata.EntryPoint] | None = None
        self._broken: dict[str, str] = {}
        self._current_source: str | None = None
        self._current_module: str | None = None
        self._checked: set[str] = set()

    # -- registration -------------------------------------------------------------------
    def __call__(self, name: str) -> Callable[[Any], Any]:
        """Decorator: ``@registry.<kind>("name")`` registers a class or factory."""

        def decorate(obj: Any) -> Any:
            # While an entry point loads, only objects of its own module take its source
            # (a module it imports registers under that module's own name).
            own = self._current_source and getattr(obj, "__module__", None) == self._current_module
            self.register(name, obj, source=self._current_source if own else _caller_source(2))
            return obj

        return decorate

    def register(self, name: str, obj: Any, *, source: str | _CallerSource | None = None) -> None:
        """Register ``obj`` under ``name``; duplicates are errors naming both sources."""
        if not isinstance(name, str) or not name:
            raise PluginError(f"{self.kind} plugin names must be non-empty strings, got {name!r}")
        source = source or _caller_source(2)
        existing = self._entries.get(name)
        if existing is not None:
            if existing.obj is obj:
                return
            raise PluginError(
                f"duplicate {self.kind} plugin '{name}': defined in {existing.source} and in "
                f"{source}; rename one of them"
            )
        _check_protocol(self.kind, name, obj, source)
        self._entries[name] = _Entry(obj, source)
        self._checked.discard(name)

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)
        self._checked.discard(name)

    # -- discovery ----------------------------------------------------------------------
    def _eps(self) -> dict[str, metadata.EntryPoint]:
        if self._entry_points is None:
            found: dict[str, metadata.EntryPoint] = {}
            try:
                eps = metadata.entry_points(group=self.group)
            except Exception as exc:  # pragma: no cover - broken metadata on the machine
                self._broken["<metadata>"] = f"reading entry points failed: {exc}"
                eps = []
            for ep in eps:
                found.setdefault(ep.name, ep)
            self._entry_points = found
        return self._entry_points

    @staticmethod
    def _dist_name(ep: metadata.EntryPoint) -> str:
        dist = getattr(ep, "dist", None)
        return getattr(dist, "name", None) or "an unknown distribution"

    def _load_entry_point(self, name: str) -> bool:
        ep = self._eps().get(name)
        if ep is None:
            return False
        source = f"entry point {ep.value} of {self._dist_name(ep)}"
        self._current_source, self._current_module = source, ep.module
        try:
            obj = ep.load()
        except Exception as exc:
            self._broken[name] = (
                f"entry point '{name}' = {ep.value} in group {self.group} of distribution "
                f"{self._dist_name(ep)} failed to load: {type(exc).__name__}: {exc}"
            )
            return False
        finally:
            self._current_source = self._current_module = None
        if name not in self._entries:
            try:
                self.register(name, obj, source=source)
            except PluginError as exc:
                self._broken[name] = str(exc)
                return False
        elif self._entries[name].obj is not obj:
            self._broken[name] = (
                f"duplicate {self.kind} plugin '{name}': defined in {self._entries[name].source} "
                f"and in {source}; rename one of them"
            )
            return False
        return True

    def names(self) -> list[str]:
        """Every known name, registered or available through an entry point (not imported)."""
        return sorted(set(self._entries) | set(self._eps()))

    def __contains__(self, name: str) -> bool:
        return name in self._entries or name in self._eps()

    def _check_shadowing(self, name: str) -> None:
        """A name registered directly that an installed entry point also claims is a duplicate."""
        if name in self._checked:
            return
        self._checked.add(name)
        ep = self._eps().get(name)
        entry = self._entries[name]
        if ep is None or (isinstance(entry.source, str) and entry.source.startswith("entry point")):
            return
        try:
            obj = ep.load()
        except Exception:  # a broken entry point is reported by infos(); the registered one stands
            return
        if obj is not entry.obj:
            raise PluginError(
                f"duplicate {self.kind} plugin '{name}': defined in {entry.source} and in entry point "
                f"{ep.value} of {self._dist_name(ep)}; rename one of them")

    def get(self, name: str) -> Any:
        """The class or factory registered as ``name``, loading its entry point if needed."""
        if name not in self._entries:
            self._load_entry_point(name)
        elif name in self._eps():
            self._check_shadowing(name)
        if name in self._entries:
            return self._entries[name].obj
        if name in self._broken:
            raise PluginError(self._broken[name])
        raise PluginError(
            f"unknown {self.kind} plugin '{name}'; available: {', '.join(self.names()) or 'none'}"
            f" (register one with @qdevolve.registry.{self.kind}(\"{name}\"), an entry point in"
            f" group {self.group}, or --plugin FILE)"
        )

    def source(self, name: str) -> str:
        """Where plugin ``name`` was registered: module, file and providing distribution."""
        self.get(name)
        return str(self._entries[name].source)

    def create(self, spec: str | dict[str, Any] | None = None, /, **overrides: Any) -> Any:
        """Build a plugin from ``{"type": name, **kwargs}`` (or a bare name)."""
        if spec is None:
            raise PluginError(f"no {self.kind} plugin given; available: {', '.join(self.names())}")
        if isinstance(spec, str):
            spec = {"type": spec}
        if not isinstance(spec, dict) or "type" not in spec:
            raise PluginError(
                f"a {self.kind} plugin spec must be a mapping with a 'type' key, got {spec!r}"
            )
        kwargs = {k: v for k, v in spec.items() if k != "type"}
        kwargs.update(overrides)
        name = spec["type"]
        factory = self.get(name)
        if self.kind == "cluster" and not inspect.isclass(factory) and not kwargs:
            return factory
        try:
            sig = inspect.signature(factory)
        except (TypeError, ValueError):
            sig = None
        if sig is not None:
            params = sig.parameters
            if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
                unknown = sorted(set(kwargs) - set(params))
                if unknown:
                    accepted = [p for p in params if p not in ("self",)]
                    from qdevolve.suggest import did_you_mean  # stdlib only: no layering cost

                    hint = did_you_mean(unknown, accepted)
                    raise PluginError(
                        f"{self.kind} plugin '{name}' got unknown option(s) {', '.join(unknown)};"
                        f"{' ' + hint if hint else ''} it accepts: {', '.join(accepted) or 'no options'}"
                    )
        obj = factory(**kwargs)
        _check_protocol(self.kind, name, type(obj) if self.kind != "cluster" else obj, self._entries[name].source)
        return obj

    def infos(self, load: bool = True) -> list[PluginInfo]:
        """Rows for ``plugins list``; with ``load`` entry points are imported and checked."""
        rows = []
        for name in self.names():
            if load and name not in self._entries:
                self._load_entry_point(name)
            if name in self._entries:
                rows.append(PluginInfo(self.kind, name, str(self._entries[name].source)))
            elif name in self._broken:
                ep = self._eps().get(name)
                src = f"entry point of {self._dist_name(ep)}" if ep else "?"
                rows.append(PluginInfo(self.kind, name, src, error=self._broken[name]))
            else:
                ep = self._eps()[name]
                rows.append(PluginInfo(self.kind, name, f"entry point {ep.value} of {self._dist_name(ep)}"))
        return rows

    def refresh(self) -> None:
        """Forget the cached entry-point list (after installing a distribution)."""
        self._entry_points = None
        self._broken.clear()
        self._checked.clear()


archive = Registry("archive")
selection = Registry("selection")
mutation = Registry("mutation")
backend = Registry("backend")
sandbox = Registry("sandbox")
objective = Registry("objective")
cluster = Registry("cluster")
executor = Registry("executor")
prompt_mutator = Registry("prompt_mutator")
REGISTRIES: dict[str, Registry] = {r.kind: r for r in (archive, selection, mutation, backend, sandbox, objective, cluster,
                                                       executor, prompt_mutator)}


def all_plugins(load: bool = True) -> list[PluginInfo]:
    """Every plugin of every kind."""
    return [info for reg in REGISTRIES.values() for info in reg.infos(load=load)]


def load_plugin_file(path: str | Path) -> PluginFile:
    """Import a local plugin file (``--plugin FILE``); its decorators register its plugins.

    Returns:
        The file's path, SHA-256 and the (kind, name) pairs it registered.
    """
    p = Path(path)
    if not p.is_file():
        raise PluginError(f"plugin file {p} does not exist; pass the path of a .py file to --plugin")
    data = p.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    before = {k: set(r._entries) for k, r in REGISTRIES.items()}
    mod_name = f"qdevolve_plugin_{p.stem}_{digest[:12]}"
    if mod_name in sys.modules:
        return PluginFile(str(p.resolve()), digest, tuple(getattr(sys.modules[mod_name], "__qdevolve_names__", ())))
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise PluginError(f"plugin file {p} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    for reg in REGISTRIES.values():
        reg._current_source, reg._current_module = str(p.resolve()), mod_name
    try:
        spec.loader.exec_module(module)
    except PluginError:
        sys.modules.pop(mod_name, None)
        raise
    except Exception as exc:
        sys.modules.pop(mod_name, None)
        raise PluginError(f"plugin file {p} failed to import: {type(exc).__name__}: {exc}") from exc
    finally:
        for reg in REGISTRIES.values():
            reg._current_source = reg._current_module = None
    names = tuple(
        (k, n) for k, r in REGISTRIES.items() for n in sorted(set(r._entries) - before[k])
    )
    module.__qdevolve_names__ = names  # type: ignore[attr-defined]
    return PluginFile(str(p.resolve()), digest, names)


@contextlib.contextmanager
def snapshot() -> Iterator[None]:
    """Restore every registry to its current state on exit (for tests)."""
    saved = {k: (dict(r._entries), copy.copy(r._entry_points), dict(r._broken), set(r._checked))
             for k, r in REGISTRIES.items()}
    try:
        yield
    finally:
        for k, r in REGISTRIES.items():
            r._entries, r._entry_points, r._broken, r._checked = saved[k]
