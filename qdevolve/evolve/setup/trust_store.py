"""The user's trust store: example directories the user vouched for with ``qdevolve trust DIR``.

As direnv does for ``.envrc``, an entry records the directory's config and prompt files by
SHA-256; while every recorded file still has its hash (and no file was added or removed),
runs of that directory honour its host keys (:mod:`qdevolve.evolve.setup.trust`). Any change
revokes the trust: the run says which file changed and asks again (or refuses).

The store is one JSON file, ``$QDEVOLVE_TRUST_FILE`` if set, else
``$XDG_CONFIG_HOME/qdevolve/trust.json``, else ``~/.config/qdevolve/trust.json``; it is written
atomically with mode 0600::

    {"version": 1, "directories": {"/abs/dir": {"granted_at": "...", "files": {"config.yaml": "<sha256>"}}}}

Recorded files: the config files (``config.yaml``, ``config.yml``, ``shinka.yaml``), every file
under ``prompts/``, and every file under a path inside the directory that the config names
(``prompt.template_dir: tpl``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qdevolve.errors import ConfigError
from qdevolve.evolve.setup.example import CONFIG_NAMES

__all__ = ["TrustStore", "TrustStatus", "trust_file", "recorded_files", "TRUST_FILE_ENV"]

TRUST_FILE_ENV = "QDEVOLVE_TRUST_FILE"
MAX_RECORDED = 2_000
MAX_STORE_BYTES = 16 << 20


def trust_file() -> Path:
    """Where the store lives (module docstring)."""
    if os.environ.get(TRUST_FILE_ENV):
        return Path(os.environ[TRUST_FILE_ENV])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "qdevolve" / "trust.json"


def _digest(path: Path) -> str:
    try:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"


def _inside(p: Path, directory: Path) -> bool:
    real, root = os.path.realpath(p), os.path.realpath(directory)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _config_paths(directory: Path) -> list[Path]:
    """Directories and files inside ``directory`` named by its config's string values."""
    from qdevolve.evolve.setup.validate import read_config_yaml

    out: list[Path] = []
    for name in CONFIG_NAMES:
        f = directory / name
        if not f.is_file():
            continue
        try:
            data = read_config_yaml(f)
        except ConfigError:
            continue  # the run reports a broken config; the file itself is recorded
        stack = [data]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
            elif isinstance(node, str) and node and "\n" not in node and "\x00" not in node and len(node) < 4096:
                for p in (Path(node).expanduser(), directory / node):
                    try:  # inside the directory, or a file named absolutely (a trusted file out is recorded too)
                        if _inside(p, directory) and p.exists() or p.is_absolute() and p.is_file():
                            out.append(p)
                    except (OSError, ValueError):
                        pass
    return out


def recorded_files(directory: str | Path) -> dict[str, str]:
    """``{path relative to the directory (or absolute when outside): sha256}`` of the files recorded."""
    d = Path(directory).resolve()
    found: set[Path] = {d / n for n in CONFIG_NAMES if (d / n).exists() or (d / n).is_symlink()}
    roots = [d / "prompts", *_config_paths(d)]
    for root in roots:
        if root.is_dir():
            for base, dirs, files in os.walk(root):
                dirs.sort()
                for name in sorted(files):
                    found.add(Path(base) / name)
                    if len(found) > MAX_RECORDED:
                        raise ConfigError(f"{d}: more than {MAX_RECORDED} config and prompt files to record; "
                                          "trust a smaller directory")
        elif root.exists() and root != d:
            found.add(root)
    out = {}
    for f in sorted(found):
        try:
            name = str(f.relative_to(d))
        except ValueError:
            name = str(f)
        out[name] = _digest(f)
    return out


@dataclass(frozen=True)
class TrustStatus:
    """What the store says about one directory: ``state`` is ``trusted``, ``changed`` or ``unknown``;
    ``detail`` names the first changed file (``changed``)."""

    state: str
    directory: str
    detail: str = ""


class TrustStore:
    """The trust store file (module docstring); every call reads it again (several shells may write)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else trust_file()

    def _read(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"version": 1, "directories": {}}
        try:
            if self.path.stat().st_size > MAX_STORE_BYTES:
                raise ValueError(f"larger than {MAX_STORE_BYTES} bytes")
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("directories"), dict):
                raise ValueError("not a trust store")
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{self.path}: the trust store cannot be read ({exc}); fix or delete it "
                              f"(set {TRUST_FILE_ENV} to use another file)") from None
        return data

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, self.path)

    def entries(self) -> dict[str, dict[str, Any]]:
        """Every trusted directory and its record."""
        return dict(self._read()["directories"])

    def grant(self, directory: str | Path) -> dict[str, str]:
        """Record ``directory``'s config and prompt files now; returns what was recorded."""
        d = str(Path(directory).resolve())
        files = recorded_files(d)
        data = self._read()
        data["directories"][d] = {"granted_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                                  "files": files}
        self._write(data)
        return files

    def revoke(self, directory: str | Path) -> bool:
        """Forget ``directory`` (the path as given or resolved); False when it was not trusted."""
        data = self._read()
        hit = [k for k in {str(directory), str(Path(directory).resolve())} if k in data["directories"]]
        for k in hit:
            del data["directories"][k]
        if hit:
            self._write(data)
        return bool(hit)

    def status(self, directory: str | Path) -> TrustStatus:
        """Whether ``directory`` is trusted now (every recorded file unchanged)."""
        d = str(Path(directory).resolve())
        entry = self._read()["directories"].get(d)
        if not isinstance(entry, dict):
            return TrustStatus("unknown", d)
        then = entry.get("files") or {}
        now = recorded_files(d)
        for name in sorted(set(then) | set(now)):
            if name not in now:
                return TrustStatus("changed", d, f"{name} was removed")
            if name not in then:
                return TrustStatus("changed", d, f"{name} was added")
            if then[name] != now[name]:
                return TrustStatus("changed", d, f"{name} changed")
        return TrustStatus("trusted", d)
