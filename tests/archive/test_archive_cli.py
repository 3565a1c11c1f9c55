"""``qdevolve archive stats|plot`` on real SQLite lineage databases."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from archive_streams import program_stream

from qdevolve import registry
from qdevolve.cli import main
from qdevolve.db.store import LineageStore


def _make_db(path: Path, spec: dict | None, *, n: int = 90, seed: int = 0, unevaluated: int = 2) -> tuple[str, list]:
    store = LineageStore(path, create=True)
    n_islands = int((spec or {}).get("n_islands", 1)) if (spec or {}).get("type") == "islands" else 1
    run_id = store.create_run(name="t", config={} if spec is None else {"archive": spec}, seed=seed)
    stream = program_stream(n, seed=seed, n_islands=n_islands)
    for p, _ in stream:
        p.run_id = run_id
    store.write(programs=[p for p, _ in stream], evaluations=[(p.id, r) for p, r in stream[: len(stream) - unevaluated]])
    store.close()
    return run_id, stream[: len(stream) - unevaluated]


def _run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("spec", [None, {"type": "islands", "n_islands": 2, "migration_interval": 5},
                                  {"type": "dgm"}])
def test_stats_json_equals_a_fresh_replay(tmp_path: Path, capsys, spec) -> None:
    db = tmp_path / "run.sqlite"
    run_id, evaluated = _make_db(db, spec)
    code, out, err = _run(capsys, "archive", "stats", "--db", str(db), "--json")
    assert code == 0, err
    got = json.loads(out)
    arc = registry.archive.create(spec or {"type": "map_elites"})
    for p, r in evaluated:
        arc.add(p, r)
    want = json.loads(json.dumps(arc.stats(), default=float))
    assert got["stats"] == want
    assert got["run_id"] == run_id and got["evaluations"] == len(evaluated) and got["unevaluated"] == 2
    assert sum(got["by_status"].values()) == len(evaluated)
    assert got["by_status"]["ok"] == sum(r.status == "ok" for _, r in evaluated)
    if spec and spec["type"] == "islands":
        assert len(got["stats"]["islands"]) == 2


def test_stats_table_and_plot(tmp_path: Path, capsys) -> None:
    db = tmp_path / "run.sqlite"
    spec = {"type": "islands", "n_islands": 2, "inner": {"type": "map_elites", "bins": 4}}
    run_id, _ = _make_db(db, spec)
    code, out, err = _run(capsys, "archive", "stats", "--db", str(db), "--run", run_id[:8])
    assert code == 0, err
    assert "QD-score" in out and "coverage" in out and "islands" in out
    png = tmp_path / "a.png"
    code, out, err = _run(capsys, "archive", "plot", "--db", str(db), "--out", str(png))
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_plot_non_grid_archive(tmp_path: Path, capsys) -> None:
    db = tmp_path / "run.sqlite"
    _make_db(db, {"type": "novelty", "k": 3})
    png = tmp_path / "n.png"
    code, _, err = _run(capsys, "archive", "plot", "--db", str(db), "--out", str(png))
    assert code == 0, err
    assert png.stat().st_size > 5_000


@pytest.mark.slow
def test_bad_inputs_are_one_line_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database\n")
    db = tmp_path / "run.sqlite"
    _make_db(db, None, n=5)
    cases = [
        ["archive", "stats", "--db", str(tmp_path / "missing.sqlite")],
        ["archive", "stats", "--db", str(junk)],
        ["archive", "stats", "--db", str(db), "--run", "zzzz"],
        ["archive", "plot", "--db", str(db), "--out", str(tmp_path / "no" / "dir.png")],
    ]
    for args in cases:
        proc = subprocess.run([sys.executable, "-m", "qdevolve", *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
