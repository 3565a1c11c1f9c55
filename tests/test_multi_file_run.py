"""The sandbox stages the evolved program tree, and a real run of examples/multi_file
evolves both files: each evaluation reports a hash of the files it was handed, and each
must be the hash of that program's own stored tree (the seed's tree would fail it)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from qdevolve.db.store import open_store
from qdevolve.programtree import ProgramTree, dump_tree, parse_tree
from qdevolve.types import Program

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "multi_file"
EVALUATOR = EXAMPLE / "evaluator.py"


def _hash(tree: ProgramTree) -> float:
    """What examples/multi_file/evaluator.py reports: the .py files beside the main file."""
    h = hashlib.sha256()
    for name in sorted(p for p in tree.files if "/" not in p and p.endswith(".py")):
        h.update(name.encode() + b"\0" + tree.files[name].encode() + b"\0")
    return float(int(h.hexdigest()[:12], 16))


def _seed() -> ProgramTree:
    return ProgramTree({p.name: p.read_text() for p in (EXAMPLE / "initial_program").glob("*.py")}, "main.py")


def _sandbox(name: str, warm: bool):
    if name == "bwrap":
        from qdevolve.sandbox.bwrap import BwrapSandbox, bwrap_available

        if not bwrap_available():
            pytest.skip("bwrap is not usable here")
        return BwrapSandbox(warm=warm)
    from qdevolve.sandbox.local import LocalSandbox

    return LocalSandbox(warm=warm)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "bwrap"])
@pytest.mark.parametrize("warm", [False, True])
def test_the_evaluator_is_handed_the_evolved_tree(backend: str, warm: bool) -> None:
    seed = _seed()
    child = seed.replace("heuristics.py", seed.files["heuristics.py"].replace(
        "return (0.5, 0.5, 0.5, 0.5)", "return (0.3, -1.2, 0.8, 0.4)"))
    assert _hash(child) != _hash(seed)
    sb = _sandbox(backend, warm)
    try:
        got = sb.evaluate(Program(code=dump_tree(child)), EVALUATOR)
        base = sb.evaluate(Program(code=dump_tree(seed)), EVALUATOR)
    finally:
        sb.close()
    assert got.status == "ok", got.error
    assert got.metrics["tree_hash"] == _hash(child) != _hash(seed)
    assert got.score == pytest.approx(1.0)  # main.py imported the evolved sibling: the exact cubic
    assert base.score < 0.6 and base.metrics["tree_hash"] == _hash(seed)


@pytest.mark.slow
def test_a_run_of_the_example_evolves_both_files(tmp_path: Path) -> None:
    db = tmp_path / "run.sqlite"
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "run", str(EXAMPLE), "--db", str(db),
                           "--iterations", "24"], capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    seed = _seed()
    changed: set[str] = set()
    checked = 0
    with open_store(db) as store:
        rows = list(store.iter_evaluated(store.latest_run_id()))
    for _, prog, res in rows:
        tree = parse_tree(prog.code)
        changed |= {p for p in tree.files if tree.files[p] != seed.files[p]}
        if res.status == "ok":
            assert res.metrics["tree_hash"] == _hash(tree), f"program {prog.id} was not evaluated as stored"
            checked += 1
    assert checked >= 10 and changed == {"main.py", "heuristics.py"}
    best = max((r.score for _, _, r in rows if r.status == "ok"), default=0.0)
    assert best > min(r.score for _, p, r in rows if p.generation == 0)



C_EXAMPLE = ROOT / "examples" / "multi_file_c"
C_REPLY = ("Better coefficients.\nFILE: poly.h\n<<<<<<< SEARCH\n#define C1 0.9\n#define C3 -0.1\n#define C5 0.01\n"
           "=======\n#define C1 0.99977\n#define C3 -0.16582\n#define C5 0.0075741\n>>>>>>> REPLACE\n")


@pytest.mark.slow
def test_a_model_reply_edits_the_named_c_file_and_the_evaluator_compiles_it() -> None:
    """examples/multi_file_c (OpenEvolve-style, not Python): a model's diff names ``poly.h``;
    the child's evaluation compiles ``main.c`` with the evolved header beside it."""
    import asyncio

    import numpy as np

    from qdevolve.backends.openai_backend import OpenAIBackend
    from qdevolve.evolve.setup.example import load_example
    from qdevolve.mutation.base import MutationContext
    from qdevolve.mutation.diff import DiffMutation
    from qdevolve.sandbox.local import LocalSandbox
    from qdevolve.testing.scripted_server import ScriptedServer

    ex = load_example(C_EXAMPLE)
    seed = Program(code=ex.seed_code, language=ex.language)
    prompts: list[str] = []

    def script(req: dict) -> str:
        prompts.append(req["messages"][-1]["content"])
        return C_REPLY if req.get("_choice", 0) == 0 else C_REPLY.replace("FILE: poly.h\n", "")

    with ScriptedServer(script, latency_s=0.0) as server:
        backend = OpenAIBackend(api_base=server.url, model="scripted")
        cands = asyncio.run(DiffMutation().propose(seed, MutationContext(rng=np.random.default_rng(0), n=2), backend))
    assert "FILE: poly.h" in prompts[0] and "FILE: main.c" in prompts[0]
    good = next(c for c in cands if c.code is not None)
    bad = next(c for c in cands if c.code is None)
    assert "put a line 'FILE: <path>'" in bad.error
    assert parse_tree(good.code).files["main.c"] == parse_tree(seed.code).files["main.c"]
    assert good.metadata["files"] == ["poly.h"]
    sb = LocalSandbox()
    try:
        before, after = sb.evaluate(seed, ex.evaluator_path), sb.evaluate(Program(code=good.code, language="c"),
                                                                          ex.evaluator_path)
    finally:
        sb.close()
    assert before.status == after.status == "ok", (before.error, after.error)
    assert before.score < 0.1 and after.score > 0.95


@pytest.mark.slow
def test_sandbox_exec_takes_a_program_directory() -> None:
    import json

    proc = subprocess.run([sys.executable, "-m", "qdevolve", "sandbox", "exec", str(EXAMPLE / "initial_program"),
                           "--evaluator", str(EVALUATOR), "--backend", "local", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["status"] == "ok" and out["metrics"]["tree_hash"] == _hash(_seed())


@pytest.mark.slow
def test_python_api_takes_a_program_directory(tmp_path: Path) -> None:
    from qdevolve.api import run_evolution

    res = run_evolution(EXAMPLE / "initial_program", EVALUATOR, db=tmp_path / "api.sqlite", iterations=4,
                        config={"mutation": [{"type": "ast"}]})
    tree = parse_tree(res.best_program.code)
    assert set(tree.files) == {"main.py", "heuristics.py"} and tree.main == "main.py"
    with pytest.raises(Exception, match="only seed"):
        run_evolution([EXAMPLE / "initial_program", EXAMPLE / "initial_program"], EVALUATOR,
                      db=tmp_path / "two.sqlite", iterations=1)
    assert not (tmp_path / "two.sqlite.example").exists()
