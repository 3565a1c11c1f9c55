"""Imports point down the layers listed in ``docs/engine.md`` (section "Layers"), never up,
and no two packages import each other, directly or around a circle; the same holds between
the sub-packages of ``qdevolve/evolve/`` (section "Packages of `evolve/`"). Every
``qdevolve`` import counts, including those inside functions."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "qdevolve"


EVOLVE = PKG / "evolve"


def _layers(heading: str = "## Layers") -> dict[str, int]:
    """``package -> layer`` from the first fenced block under ``heading`` in docs/engine.md."""
    doc = (ROOT / "docs" / "engine.md").read_text()
    section = doc.split(heading + "\n", 1)[1]
    block = section.split("```", 2)[1]
    out: dict[str, int] = {}
    for line in block.splitlines():
        m = re.match(r"\s*(\d+)\.\s+(.+)", line)
        if m:
            for name in m.group(2).split("#", 1)[0].split():
                out[name.strip(",")] = int(m.group(1))
    return out


def _imports(root: Path = PKG) -> dict[tuple[str, str], list[str]]:
    """``(from package, to package) -> [module that imports]`` for every qdevolve import made
    in ``root`` (``qdevolve/`` or one of its packages), packages named one level below it."""
    prefix = ["qdevolve", *root.relative_to(PKG).parts]
    depth = len(prefix)
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        src = rel.parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names[:1] if isinstance(node, ast.ImportFrom) and node.module != "qdevolve" else names:
                parts = name.split(".")
                if parts[:depth] != prefix or len(parts) <= depth:
                    continue
                dst = parts[depth]
                if dst != src:
                    edges[(src, dst)].append(str(rel))
    return edges


def test_every_package_has_a_layer() -> None:
    layers = _layers()
    packages = {p.name.removesuffix(".py") for p in PKG.iterdir()
                if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")}
    packages -= {"__main__"}
    assert packages <= set(layers), f"packages missing from docs/engine.md's layers: {sorted(packages - set(layers))}"


def _upward(layers: dict[str, int], edges: dict[tuple[str, str], list[str]]) -> list[str]:
    return [f"{src} (layer {layers[src]}) imports {dst} (layer {layers[dst]}) in {sorted(set(where))}"
            for (src, dst), where in sorted(edges.items())
            if src in layers and dst in layers and layers[dst] > layers[src]]


def _circles(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst in edges:
        graph[src].add(dst)
    circles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return circles


def test_no_upward_import() -> None:
    up = _upward(_layers(), _imports())
    assert not up, "upward imports:\n" + "\n".join(up)


def test_no_circle_between_packages() -> None:
    circles = _circles(_imports())
    assert not circles, "circles between packages:\n" + "\n".join(circles)


EVOLVE_HEADING = "## Packages of `evolve/`"


def test_every_module_of_evolve_is_in_a_layered_sub_package() -> None:
    layers = _layers(EVOLVE_HEADING)
    loose = sorted(p.name for p in EVOLVE.glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules directly in qdevolve/evolve/ (put each in a sub-package): {loose}"
    subs = {p.name for p in EVOLVE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    no_door = sorted(s for s in subs if not (EVOLVE / s / "__init__.py").exists())
    assert not no_door, f"sub-packages of qdevolve/evolve/ without an __init__.py front door: {no_door}"
    assert subs <= set(layers), f"sub-packages missing from docs/engine.md's evolve layers: {sorted(subs - set(layers))}"


def test_every_front_door_names_its_api() -> None:
    import importlib

    for sub in sorted(_layers(EVOLVE_HEADING)):
        door = importlib.import_module(f"qdevolve.evolve.{sub}")
        names = getattr(door, "__all__", None)
        assert names, f"qdevolve/evolve/{sub}/__init__.py names no public API (__all__)"
        missing = [n for n in names if not hasattr(door, n)]
        assert not missing, f"qdevolve/evolve/{sub}/__init__.py: __all__ names {missing}, which it does not define"


def test_no_upward_import_between_evolve_packages() -> None:
    up = _upward(_layers(EVOLVE_HEADING), _imports(EVOLVE))
    assert not up, "upward imports inside qdevolve/evolve/:\n" + "\n".join(up)


def test_no_circle_between_evolve_packages() -> None:
    circles = _circles(_imports(EVOLVE))
    assert not circles, "circles between the packages of qdevolve/evolve/:\n" + "\n".join(circles)


def test_evolve_reaches_the_agents_package_only_through_the_registry() -> None:
    """``qdevolve.agents`` sits above the engine: the engine finds ``self`` and ``agents`` by name."""
    edges = _imports()
    assert ("evolve", "agents") not in edges, f"evolve imports agents in {sorted(set(edges[('evolve', 'agents')]))}"
    layers = _layers()
    assert layers["agents"] > layers["evolve"]
