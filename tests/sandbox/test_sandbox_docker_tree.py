"""The docker sandbox stages a program tree whole, cold and warm: the evaluator of
examples/multi_file reports a hash of the files beside the main file, which must be the
child's own (the seed's tree would fail it), and main.py imports its evolved sibling."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from qdevolve.programtree import ProgramTree, dump_tree
from qdevolve.types import Program

from .conftest import make_box

pytestmark = [pytest.mark.docker, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "multi_file"


def _hash(tree: ProgramTree) -> float:
    h = hashlib.sha256()
    for name in sorted(p for p in tree.files if "/" not in p and p.endswith(".py")):
        h.update(name.encode() + b"\0" + tree.files[name].encode() + b"\0")
    return float(int(h.hexdigest()[:12], 16))


@pytest.mark.parametrize("warm", [False, True])
def test_docker_is_handed_the_evolved_tree(docker_image: str, warm: bool) -> None:
    seed = ProgramTree({p.name: p.read_text() for p in (EXAMPLE / "initial_program").glob("*.py")},
                       "main.py")
    child = seed.replace("heuristics.py", seed.files["heuristics.py"].replace(
        "return (0.5, 0.5, 0.5, 0.5)", "return (0.3, -1.2, 0.8, 0.4)"))
    nested = ProgramTree({**child.files, "pkg/extra.py": "VALUE = 1\n"}, "main.py")  # a subdirectory travels too
    box = make_box("docker", image=docker_image, warm=warm)
    try:
        got = box.evaluate(Program(code=dump_tree(child)), EXAMPLE / "evaluator.py")
        base = box.evaluate(Program(code=dump_tree(seed)), EXAMPLE / "evaluator.py")
        deep = box.evaluate(Program(code=dump_tree(nested)), EXAMPLE / "evaluator.py")
    finally:
        box.close()
    assert got.status == "ok", got.error
    assert got.metrics["tree_hash"] == _hash(child) != _hash(seed)
    assert got.score == pytest.approx(1.0)
    assert base.status == "ok" and base.score < 0.6 and base.metrics["tree_hash"] == _hash(seed)
    assert deep.status == "ok", deep.error
