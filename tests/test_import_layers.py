"""Imports point down the layers listed in ``docs/engine.md`` (section "Layers"), never up,
and no two packages import each other, directly or around a circle. Every ``qdevolve``
import counts, including those inside functions."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "qdevolve"


def _layers() -> dict[str, int]:
    """``package -> layer`` from the fenced block under '## Layers' in docs/engine.md."""
    doc = (ROOT / "docs" / "engine.md").read_text()
    section = doc.split("## Layers", 1)[1]
    block = section.split("```", 2)[1]
    out: dict[str, int] = {}
    for line in block.splitlines():
        m = re.match(r"\s*(\d+)\.\s+(.+)", line)
        if m:
            for name in m.group(2).split("#", 1)[0].split():
                out[name.strip(",")] = int(m.group(1))
    return out


def _imports() -> dict[tuple[str, str], list[str]]:
    """``(from package, to package) -> [module that imports]`` for every qdevolve import."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
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
                if parts[0] != "qdevolve" or len(parts) < 2:
                    continue
                dst = parts[1]
                if dst != src:
                    edges[(src, dst)].append(str(rel))
    return edges


def test_every_package_has_a_layer() -> None:
    layers = _layers()
    packages = {p.name.removesuffix(".py") for p in PKG.iterdir()
                if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")}
    packages -= {"__main__"}
    assert packages <= set(layers), f"packages missing from docs/engine.md's layers: {sorted(packages - set(layers))}"


def test_no_upward_import() -> None:
    layers = _layers()
    up = [f"{src} (layer {layers[src]}) imports {dst} (layer {layers[dst]}) in {sorted(set(where))}"
          for (src, dst), where in sorted(_imports().items())
          if src in layers and dst in layers and layers[dst] > layers[src]]
    assert not up, "upward imports:\n" + "\n".join(up)


def test_no_circle_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst in _imports():
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
    assert not circles, "circles between packages:\n" + "\n".join(circles)
