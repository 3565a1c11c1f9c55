"""``auto`` is decided in one place (:func:`qdevolve.sandbox.resolve_sandbox`): runs, the local
executor, Ray workers and ``qdevolve sandbox`` all ask it."""

from __future__ import annotations

import pytest

import qdevolve.sandbox as sandbox_pkg
from qdevolve.errors import PluginError
from qdevolve.sandbox import resolve_sandbox


def test_auto_and_no_type_resolve_to_the_best_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_pkg, "best_available", lambda: "local")
    spec = {"type": "auto", "warm": False}
    assert resolve_sandbox(spec) == {"type": "local", "warm": False}
    assert spec["type"] == "auto"  # the caller's spec is left as it was
    assert resolve_sandbox({})["type"] == "local"
    assert resolve_sandbox({"type": "docker"})["type"] == "docker"


def test_an_unknown_type_names_the_known_ones() -> None:
    with pytest.raises(PluginError, match="local"):
        resolve_sandbox({"type": "nosuchbox"})


def test_every_caller_asks_the_one_resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    from qdevolve.cli.sandbox import _make
    from qdevolve.evolve.executors.local import make_sandbox

    asked: list[dict] = []

    def fake(spec: dict) -> dict:
        asked.append(dict(spec))
        return {**spec, "type": "local"}

    monkeypatch.setattr(sandbox_pkg, "resolve_sandbox", fake)
    name, box = make_sandbox({"type": "auto"})
    box.close()
    name2, box2 = _make("auto", False, None)
    box2.close()
    assert (name, name2) == ("local", "local") and len(asked) == 2
