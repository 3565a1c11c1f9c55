"""``--db`` everywhere: SQLAlchemy URLs (never paths), ``QDEVOLVE_DB``, passwords masked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qdevolve.db._open import display_target, normalize_target
from qdevolve.db.store import LineageStore
from qdevolve.errors import DatabaseError
from qdevolve.types import EvalResult, Program

SECRET = "s3cr3t-pw"


def qdevolve(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run([sys.executable, "-m", "qdevolve", *args], capture_output=True, text=True,
                          timeout=180, cwd=cwd, env=full)


def _small_run(target: str) -> tuple[str, Program, Program]:
    st = LineageStore(target, create=True)
    rid = st.create_run(name="url-run", config={"archive": {"type": "map_elites", "feature_dimensions": ["f"]}})
    a = Program(code="x = 1\n", run_id=rid)
    b = Program(code="x = 2\n", run_id=rid, parent_ids=(a.id,), generation=1, operator="diff")
    st.write(programs=[a, b], evaluations=[(a.id, EvalResult(score=1.0, features={"f": 0.1})),
                                           (b.id, EvalResult(score=2.0, features={"f": 0.9}))])
    st.close()
    return rid, a, b


def test_sqlite_urls_become_paths_and_other_urls_are_checked() -> None:
    assert normalize_target("sqlite:///archives/r.sqlite") == "archives/r.sqlite"
    assert normalize_target("sqlite:////tmp/r.sqlite") == "/tmp/r.sqlite"
    assert normalize_target("runs/x.sqlite") == "runs/x.sqlite"
    assert normalize_target(f"postgres://u:{SECRET}@h/db").startswith("postgresql+psycopg://")
    assert display_target(f"postgresql+psycopg://u:{SECRET}@h:5432/db") == "postgresql+psycopg://u:***@h:5432/db"
    for bad, why in ((f"mysql+nodriver://u:{SECRET}@h/db", "unknown database kind"),
                     ("sqlite://", "in-memory"), (f"post gres://u:{SECRET}@h", "not a valid")):
        with pytest.raises(DatabaseError, match=why) as info:
            normalize_target(bad)
        assert SECRET not in str(info.value)


@pytest.mark.slow
def test_sqlite_url_and_env_var_reach_every_view(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    rid, a, b = _small_run(str(db))
    url = f"sqlite:///{db}"
    rows = json.loads(qdevolve("runs", "list", "--db", url, "--json", cwd=tmp_path).stdout)
    assert rows[0]["id"] == rid and rows[0]["programs"] == 2
    env = {"QDEVOLVE_DB": url}
    for args, expect in ((["lineage", "tree"], a.id[:10]), (["lineage", "show", b.id], "x = 2"),
                         (["archive", "stats", "--json"], '"evaluations": 2'),
                         (["lineage", "export", "--format", "json", "--out", str(tmp_path / "g.json")], "wrote 2")):
        proc = qdevolve(*args, cwd=tmp_path, env=env)
        assert proc.returncode == 0, (args, proc.stderr)
        assert expect in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json", "r.sqlite"]  # no stray files


@pytest.mark.slow
def test_unreachable_url_is_one_line_without_password_and_no_path(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://qd:{SECRET}@127.0.0.1:9/nowhere"
    for args in (["runs", "list", "--db", url], ["lineage", "tree", "--db", url],
                 ["archive", "stats", "--db", url], ["eval-policy", "--task", "multi_answer", "--db", url]):
        proc = qdevolve(*args, cwd=tmp_path)
        assert proc.returncode == 2, (args, proc.stderr)
        assert SECRET not in proc.stdout + proc.stderr
        assert "qd:***@127.0.0.1:9/nowhere" in proc.stderr and "cannot connect" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    proc = qdevolve("runs", "list", "--db", f"postgres+nope://qd:{SECRET}@h/x", cwd=tmp_path)
    assert proc.returncode == 2 and "unknown database kind" in proc.stderr and SECRET not in proc.stderr
    assert list(tmp_path.iterdir()) == []  # the URL was never taken as a path


@pytest.mark.slow
@pytest.mark.postgres
def test_postgres_url_for_every_inspection_command(pg_url: str, tmp_path: Path) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    from qdevolve.db import schema as S

    eng = create_engine(pg_url)
    S.metadata.drop_all(eng)
    eng.dispose()
    rid, a, b = _small_run(pg_url)
    password = make_url(pg_url).password
    env = {"QDEVOLVE_DB": pg_url}
    for args, expect in ((["runs", "list"], "url-run"), (["lineage", "tree"], a.id[:10]),
                         (["lineage", "show", b.id[:8]], "x = 2"), (["lineage", "ancestry", b.id], a.id[:12]),
                         (["archive", "stats"], "QD-score"),
                         (["lineage", "export", "--format", "graphml", "--out", str(tmp_path / "g.graphml")],
                          "wrote 2 programs and 1 edges")):
        proc = qdevolve(*args, cwd=tmp_path, env=env)
        assert proc.returncode == 0, (args, proc.stderr)
        assert expect in proc.stdout
        if password:
            assert f":{password}@" not in proc.stdout + proc.stderr
    shown = qdevolve("runs", "list", "--db", pg_url, cwd=tmp_path).stdout
    assert ":***@" in shown.replace("\n", "")


def test_new_run_target_refuses_an_existing_file_and_accepts_a_server(tmp_path: Path) -> None:
    from qdevolve.cli._db import check_new_run, shown
    from qdevolve.errors import ConfigError

    check_new_run(f"postgresql+psycopg://u:{SECRET}@h/db")  # a server holds many runs
    check_new_run(str(tmp_path / "new.sqlite"))
    (tmp_path / "old.sqlite").write_bytes(b"SQLite format 3\x00")  # not empty (a 0-byte file is a new run)
    with pytest.raises(ConfigError, match="already exists; continue it with 'qdevolve resume"):
        check_new_run(str(tmp_path / "old.sqlite"))
    assert SECRET not in shown(f"postgresql+psycopg://u:{SECRET}@h/db")
    assert shown("runs/\x1b]52;c;x\x07.sqlite") == "runs/\\e]52;c;x^G.sqlite"
