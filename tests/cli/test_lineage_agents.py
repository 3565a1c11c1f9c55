"""``qdevolve lineage`` on a run of agents: programs of operator ``self`` scored per task."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from qdevolve.cli import cli
from qdevolve.db.store import LineageStore
from qdevolve.types import EvalResult, Program

AGENT = '''def propose(task, parent, feedback, tools):
    """Mutate the parent {n} time(s)."""
    child = parent
    for _ in range({n}):
        child = tools.mutate(child)
    return child
'''


def build_agents_run(path: Path) -> dict[str, Program]:
    """A seed agent, two self-modified children and a grandchild that failed, in a real
    SQLite run: metrics one per task, held-out tasks as ``heldout/<task>``."""
    st = LineageStore(path, create=True)
    rid = st.create_run(name="agents-run", run_id="a9" * 16)
    seed = Program(code=AGENT.format(n=1), run_id=rid, id="a0" + "0" * 30, operator="seed")
    one = Program(code=AGENT.format(n=2), run_id=rid, id="a1" + "0" * 30, parent_ids=(seed.id,),
                  generation=1, operator="self")
    two = Program(code=AGENT.format(n=3).replace("tools.mutate", "tools.generate"), run_id=rid,
                  id="a2" + "0" * 30, parent_ids=(seed.id,), generation=1, operator="self")
    bad = Program(code="def propose(:\n", run_id=rid, id="a3" + "0" * 30, parent_ids=(one.id,), generation=2,
                  operator="self")
    tasks = lambda cp, srt, held, total: {"circle_packing": cp, "sort_speed": srt,  # noqa: E731
                                          "heldout/knapsack": held, "combined_score": total}
    st.write(programs=[seed, one, two, bad], evaluations=[
        (seed.id, EvalResult(score=0.5, metrics=tasks(0.4, 0.6, 0.3, 0.5), tests=[0.4, 0.6])),
        (one.id, EvalResult(score=0.7, metrics=tasks(0.65, 0.75, 0.45, 0.7), tests=[0.65, 0.75])),
        (two.id, EvalResult(score=0.45, metrics=tasks(0.5, 0.4, 0.2, 0.45), tests=[0.5, 0.4])),
        (bad.id, EvalResult(status="error", error="SyntaxError: agent a3 does not parse"))])
    st.close()
    return {"seed": seed, "one": one, "two": two, "bad": bad}


@pytest.fixture
def agents_db(tmp_path: Path) -> tuple[Path, dict[str, Program]]:
    path = tmp_path / "agents.sqlite"
    return path, build_agents_run(path)


def invoke(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def test_tree_shows_the_agents_and_their_self_modifications(agents_db: tuple[Path, dict[str, Program]]) -> None:
    path, P = agents_db
    out = invoke("lineage", "tree", "--db", str(path), "--label", "operator")
    assert "agents-run" in out
    lines = out.splitlines()
    assert P["seed"].id[:10] in lines[1] and "seed" in lines[1]
    assert any(P["one"].id[:10] in ln and "self" in ln and "score=0.7" in ln for ln in lines)
    assert any(P["bad"].id[:10] in ln and "error" in ln for ln in lines)


def test_show_prints_task_tables_and_the_self_modification(agents_db: tuple[Path, dict[str, Program]]) -> None:
    path, P = agents_db
    out = invoke("lineage", "show", P["one"].id[:6], "--db", str(path))
    assert "task scores (2 scoring, 1 held out, against the parent's):" in out
    scoring, held = out.split("held-out task", 1)
    assert "scoring task" in scoring and "knapsack" not in scoring.split("scoring task", 1)[1]
    row = next(ln for ln in scoring.splitlines() if ln.strip().startswith("circle_packing"))
    assert row.split() == ["circle_packing", "0.65", "0.4", "+0.25"]
    row = next(ln for ln in held.splitlines() if ln.strip().startswith("knapsack"))
    assert row.split() == ["knapsack", "0.45", "0.3", "+0.15"]
    assert "(mean)" in scoring and "0.7" in scoring.split("(mean)")[1].splitlines()[0]
    assert "heldout/knapsack" not in out  # the prefix is the table's job
    assert "combined_score: 0.7" in out  # not a task: still a metric
    assert f"self-modification: diff against parent {P['seed'].id}" in out
    assert "-    for _ in range(1):" in out and "+    for _ in range(2):" in out
    seed = invoke("lineage", "show", P["seed"].id[:6], "--db", str(path))
    assert "task scores (2 scoring, 1 held out):" in seed and "parent" not in seed.split("task scores")[1].split("code:")[0]
    assert "diff against" not in seed
    bad = invoke("lineage", "show", P["bad"].id[:6], "--db", str(path))
    assert "status    error" in bad and "does not parse" in bad and "task scores" not in bad


def test_a_plain_program_keeps_its_metrics_list(tmp_path: Path) -> None:
    st = LineageStore(tmp_path / "plain.sqlite", create=True)
    rid = st.create_run(name="plain")
    p = Program(code="x = 1\n", run_id=rid, id="b0" + "0" * 30)
    st.write(programs=[p], evaluations=[(p.id, EvalResult(score=1.0, metrics={"circle_packing": 1.0}))])
    st.close()
    out = invoke("lineage", "show", "b0", "--db", str(tmp_path / "plain.sqlite"))
    assert "task scores" not in out and "circle_packing: 1.0" in out


def test_task_names_are_terminal_safe(tmp_path: Path) -> None:
    st = LineageStore(tmp_path / "hostile.sqlite", create=True)
    rid = st.create_run(name="hostile")
    p = Program(code="x = 1\n", run_id=rid, id="c0" + "0" * 30, operator="self")
    st.write(programs=[p], evaluations=[(p.id, EvalResult(score=1.0, metrics={"\x1b]52;c;AAAA\x07t": 1.0,
                                                                               "heldout/\x1b[2Jh": 0.5}))])
    st.close()
    out = invoke("lineage", "show", "c0", "--db", str(tmp_path / "hostile.sqlite"))
    assert "\x1b" not in out and "\x07" not in out and "task scores (1 scoring, 1 held out)" in out
