"""The out-of-core plugin package in plugins/qdevolve_boltzmann, installed with pip and
found through its ``qdevolve.selection`` entry point like any third-party plugin."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import subprocess
import sys

import pytest

from qdevolve import registry

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("qdevolve_boltzmann") is None,
    reason="plugins/qdevolve_boltzmann is not installed; 'make bootstrap' installs it "
           "(pip install -e plugins/qdevolve_boltzmann)",
)


def _distributions() -> list[str]:
    return importlib.metadata.packages_distributions().get("qdevolve_boltzmann", [])


def test_boltzmann_comes_from_its_distribution(registry_snapshot: None) -> None:
    dists = _distributions()
    assert dists, "qdevolve_boltzmann is importable but no installed distribution provides it"
    eps = [ep for ep in importlib.metadata.entry_points(group="qdevolve.selection") if ep.name == "boltzmann"]
    assert eps and eps[0].value.startswith("qdevolve_boltzmann")
    rule = registry.selection.create({"type": "boltzmann", "temperature": 0.5})
    assert callable(getattr(rule, "select", None))
    source = registry.selection.source("boltzmann")
    assert any(d in source for d in dists), source
    with pytest.raises(Exception, match="temprature"):
        registry.selection.create({"type": "boltzmann", "temprature": 0.5})


def test_boltzmann_is_listed_by_the_cli() -> None:
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "plugins", "list", "--json", "--kind", "selection"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert "boltzmann" in rows and "error" not in rows["boltzmann"]
    assert any(d in rows["boltzmann"]["source"] for d in _distributions())
