"""``qdevolve runs | lineage | plugins`` on real databases: in-process for output checks,
real subprocesses for exit statuses, entry points and the 100k-program tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import networkx as nx
import pytest
from click.testing import CliRunner

from qdevolve.cli import cli
from qdevolve.db.store import LineageStore
from qdevolve.types import EvalResult, Program


@pytest.fixture
def db(tmp_path: Path) -> tuple[Path, dict[str, Program]]:
    """seed -> a -> c, seed -> b, a -> d (error), crossover e of c and b; two policy versions."""
    path = tmp_path / "cli.sqlite"
    st = LineageStore(path, create=True)
    rid = st.create_run(name="cli-run", run_id="r" * 32)
    P: dict[str, Program] = {}
    P["s"] = Program(code="def f():\n    return 1\n", run_id=rid, id="5" + "0" * 31)
    P["a"] = Program(code="def f():\n    return 2\n", run_id=rid, id="a" + "0" * 31, parent_ids=(P["s"].id,),
                     generation=1, operator="diff", policy_version=0)
    P["b"] = Program(code="def f():\n    return 3\n", run_id=rid, id="b" + "0" * 31, parent_ids=(P["s"].id,),
                     generation=1, operator="rewrite", policy_version=1)
    P["c"] = Program(code="def f():\n    return 4\n", run_id=rid, id="c" + "0" * 31, parent_ids=(P["a"].id,),
                     generation=2, operator="diff", policy_version=1)
    P["d"] = Program(code="def f(:\n", run_id=rid, id="d" + "0" * 31, parent_ids=(P["a"].id,),
                     generation=2, operator="diff")
    P["e"] = Program(code="def f():\n    return 34\n", run_id=rid, id="e" + "0" * 31,
                     parent_ids=(P["c"].id, P["b"].id), generation=3, operator="crossover")
    st.write(programs=list(P.values()), evaluations=[
        (P["s"].id, EvalResult(score=0.1)), (P["a"].id, EvalResult(score=0.5)),
        (P["b"].id, EvalResult(score=0.3)), (P["c"].id, EvalResult(score=0.7)),
        (P["d"].id, EvalResult(status="error", error="SyntaxError", artifacts={"traceback": "line 1"})),
        (P["e"].id, EvalResult(score=0.9, metrics={"combined_score": 0.9, "time_s": 1.5},
                               artifacts={"stdout": "packed 26 circles"}))])
    st.add_policy_version(rid, 0, objective="grpo", metrics={"loss": 0.5, "kl": 0.0, "entropy": 1.2, "D_n": 0.8})
    st.add_policy_version(rid, 1, parent_version=0, objective="grpo", step=8,
                          metrics={"loss": 0.25, "kl": 0.03, "entropy": 1.1, "D_n": 0.6})
    st.close()
    return path, P


def invoke(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def qdevolve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "qdevolve", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "COLUMNS": "160", **(env or {})})


def test_runs_list(db: tuple[Path, dict[str, Program]]) -> None:
    path, _ = db
    rows = json.loads(invoke("runs", "list", "--db", str(path), "--json"))
    assert len(rows) == 1 and rows[0]["name"] == "cli-run"
    assert rows[0]["programs"] == 6 and rows[0]["evaluations"] == 6 and rows[0]["best_score"] == 0.9
    out = invoke("runs", "list", "--db", str(path))
    assert "cli-run" in out and "0.9" in out


def test_tree_is_bounded_and_labelled(db: tuple[Path, dict[str, Program]]) -> None:
    path, P = db
    out = invoke("lineage", "tree", "--db", str(path))
    for k in "sabcde":
        assert P[k].id[:10] in out
    assert "score=0.9" in out and "error" in out
    out = invoke("lineage", "tree", "--db", str(path), "--top", "1", "--depth", "1")
    assert P["a"].id[:10] in out and P["b"].id[:10] not in out and "... 1 more" in out
    out = invoke("lineage", "tree", "--db", str(path), "--root", "a", "--depth", "1", "--label", "operator")
    assert P["s"].id[:10] not in out and P["c"].id[:10] in out and P["e"].id[:10] not in out
    out = invoke("lineage", "tree", "--db", str(path), "--label", "policy_version")
    assert "policy=v1" in out and "policy=-" in out


@pytest.mark.parametrize("whole_run", [False, True])
def test_tree_says_where_depth_cuts_it(db: tuple[Path, dict[str, Program]], whole_run: bool,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A node whose children lie below --depth gets a marker line with their count, on both
    the level-by-level path and the whole-run pass of a large run; a leaf gets none."""
    import qdevolve.cli.lineage as lineage_cli

    if whole_run:
        monkeypatch.setattr(lineage_cli, "_WIDE", 0)
    path, P = db
    lines = invoke("lineage", "tree", "--db", str(path), "--depth", "1").splitlines()
    at = {k: next(i for i, ln in enumerate(lines) if P[k].id[:10] in ln) for k in "ab"}
    assert lines[at["a"] + 1].endswith(f"└── ... +2 children below, cut at --depth 1 "
                                       f"(--depth 2 or --root {P['a'].id[:12]} shows them)"), lines
    assert "+1 child below, cut at --depth 1" in lines[at["b"] + 1], lines
    assert sum("cut at --depth" in ln for ln in lines) == 2
    lines = invoke("lineage", "tree", "--db", str(path), "--depth", "0").splitlines()
    assert lines[-1].endswith(f"+2 children below, cut at --depth 0 (--depth 1 or --root {P['s'].id[:12]} "
                              "shows them)"), lines
    full = invoke("lineage", "tree", "--db", str(path), "--depth", "5")
    assert "cut at --depth" not in full and P["e"].id[:10] in full


def test_show_prints_code_result_and_diff(db: tuple[Path, dict[str, Program]]) -> None:
    path, P = db
    out = invoke("lineage", "show", "e0", "--db", str(path))
    assert P["e"].id in out and "crossover" in out and "score     0.9" in out
    assert "combined_score: 0.9" in out and "packed 26 circles" in out
    assert "return 34" in out
    assert f"diff against first parent {P['c'].id}" in out
    assert "-    return 4" in out and "+    return 34" in out
    out = invoke("lineage", "show", "d", "--db", str(path))
    assert "status    error" in out and "SyntaxError" in out and "line 1" in out
    out = invoke("lineage", "show", "5", "--db", str(path))
    assert "(seed)" in out and "diff against" not in out


def test_ancestry_diff_policy(db: tuple[Path, dict[str, Program]]) -> None:
    path, P = db
    rows = json.loads(invoke("lineage", "ancestry", "e", "--db", str(path), "--json"))
    assert {r["id"][0]: r["depth"] for r in rows} == {"e": 0, "c": 1, "b": 1, "a": 2, "5": 2}
    assert P["s"].id[:12] in invoke("lineage", "ancestry", "e", "--db", str(path))
    out = invoke("lineage", "diff", "a", "b", "--db", str(path))
    assert f"--- {P['a'].id}" in out and "-    return 2" in out and "+    return 3" in out
    versions = json.loads(invoke("lineage", "policy", "--db", str(path), "--json"))
    assert [(v["version"], v["loss"], v["kl"], v["entropy"], v["D_n"], v["programs"]) for v in versions] == [
        (0, 0.5, 0.0, 1.2, 0.8, 1), (1, 0.25, 0.03, 1.1, 0.6, 2)]
    out = invoke("lineage", "policy", "--db", str(path))
    assert "grpo" in out and "0.03" in out


@pytest.mark.parametrize("fmt", ["graphml", "json", "dot"])
def test_export(db: tuple[Path, dict[str, Program]], fmt: str, tmp_path: Path) -> None:
    path, P = db
    out_file = tmp_path / f"lineage.{fmt}"
    assert "wrote 6 programs and 6 edges" in invoke("lineage", "export", "--db", str(path), "--format", fmt,
                                                    "--out", str(out_file))
    if fmt == "graphml":
        g = nx.read_graphml(out_file)
        assert g.nodes[P["e"].id]["score"] == 0.9 and g.number_of_edges() == 6
    elif fmt == "json":
        nodes = {n["id"]: n for n in json.loads(out_file.read_text())["nodes"]}
        assert nodes[P["e"].id]["parent_ids"] == [P["c"].id, P["b"].id]
        assert nodes[P["d"].id]["status"] == "error" and nodes[P["d"].id]["generation"] == 2
    else:
        text = out_file.read_text()
        assert text.count(" -> ") == 6 and text.startswith("digraph")


def test_errors_are_one_line_exit_2(db: tuple[Path, dict[str, Program]], tmp_path: Path) -> None:
    path, _ = db
    for args, expected in (
        (["lineage", "show", "zzz", "--db", str(path)], "no program with id 'zzz'"),
        (["lineage", "tree", "--db", str(tmp_path / "missing.sqlite")], "no such database"),
        (["lineage", "tree", "--db", str(path), "--run", "nope"], "no run with id 'nope'"),
    ):
        proc = qdevolve(*args)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and expected in proc.stderr
    # an ambiguous prefix: both "a0..." and "ab..." start with "a"
    st = LineageStore(path)
    st.write(programs=[Program(code="x\n", run_id="r" * 32, id="ab" + "1" * 30)])
    st.close()
    proc = qdevolve("lineage", "show", "a", "--db", str(path))
    assert proc.returncode == 2 and "ambiguous" in proc.stderr


@pytest.mark.slow
def test_plugins_list_json_and_table(tmp_path: Path) -> None:
    plugin = tmp_path / "my_rule.py"
    plugin.write_text(
        "from qdevolve import registry\n\n"
        "@registry.selection('cli_test_rule')\n"
        "class Rule:\n"
        "    def select(self, candidates, rng, n=1):\n"
        "        return candidates[:n]\n")
    dist = tmp_path / "site" / "qd_broken_demo-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: qd-broken-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[qdevolve.cluster]\nghost = qd_missing_module:Ghost\n")
    env = {"PYTHONPATH": str(tmp_path / "site")}
    proc = qdevolve("plugins", "list", "--json", "--plugin", str(plugin), env=env)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert all({"kind", "name", "source"} <= set(r) for r in rows)
    mine = [r for r in rows if r["name"] == "cli_test_rule"]
    assert mine == [{"kind": "selection", "name": "cli_test_rule", "source": str(plugin.resolve())}]
    ghost = [r for r in rows if r["name"] == "ghost"]
    assert ghost and ghost[0]["kind"] == "cluster" and "qd-broken-demo" in ghost[0]["error"]
    assert any(r["kind"] == "selection" and r["name"] == "uniform" for r in rows)  # core entry points
    table = qdevolve("plugins", "list", "--kind", "cluster", env=env)
    assert table.returncode == 0 and "ghost" in table.stdout and "BROKEN" in table.stdout


@pytest.mark.slow
def test_tree_of_a_100k_program_run_is_fast_and_bounded(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        from bench_store import build_programs
    finally:
        sys.path.pop(0)
    path = tmp_path / "big.sqlite"
    st = LineageStore(path, create=True)
    rid = st.create_run(name="big")
    progs, results = build_programs(rid, 100_000)
    for i in range(0, len(progs), 10_000):
        st.write(programs=progs[i:i + 10_000],
                 evaluations=[(p.id, r) for p, r in zip(progs[i:i + 10_000], results[i:i + 10_000], strict=True)])
    st.close()
    t = time.perf_counter()
    proc = qdevolve("lineage", "tree", "--db", str(path), "--depth", "3", "--top", "4")
    elapsed = time.perf_counter() - t
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # header + at most 1 + 4 + 16 + 64 nodes, plus at most one "... N more" per expanded node and one
    # "cut at --depth" marker per node of the last level
    assert 1 + 1 + 4 < len(lines) <= 1 + 85 + 21 + 64, len(lines)
    assert any("children below, cut at --depth 3" in line for line in lines)
    assert sum("score=" in line for line in lines) <= 85
    n_seed_children = sum(1 for p in progs if p.parent_ids == (progs[0].id,))
    assert n_seed_children > 4  # uniform attachment: about ln(100000) = 11.5 expected
    assert f"    └── ... {n_seed_children - 4} more" in lines
    assert elapsed < 20, elapsed
