"""A database may come from anyone: every reading command answers a crafted one with one line.

Each crafted file (``_crafted.CRAFTS``) is read by every reading command through the real
command line (in process: ``qdevolve.cli.main``); the answer is a normal exit or exit 2 with
exactly one ``error:`` line, never a traceback or a hang. Views, triggers and missing columns
are refused on open, and a statement's database time is bounded.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from qdevolve.db import _untrusted
from qdevolve.errors import DatabaseError

from . import _crafted

REFUSED_ON_OPEN = {"recursive_view": "view 'forever'", "shadowing_view": "view 'evaluations'",
                   "trigger": "trigger 't'", "missing_column": "lacks the column 'features'",
                   "missing_table": "no table 'edges'"}


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[str]]:
    path = tmp_path_factory.mktemp("crafted") / "valid.sqlite"
    rid = _crafted.valid_db(path)
    pids = [r[0] for r in sqlite3.connect(path).execute("SELECT id FROM programs ORDER BY seq")]
    return path, rid, pids


@pytest.fixture(autouse=True)
def _budget_off() -> Iterator[None]:
    """The CLI turns the query bound on for the process; leave it as each test found it."""
    before = _untrusted._budget_s
    yield
    _untrusted._budget_s = before


def _commands(db: Path, out: Path, pids: list[str]) -> list[list[str]]:
    d = ["--db", str(db)]
    return [["runs", "list", *d], ["runs", "list", "--json", *d], ["lineage", "tree", *d],
            ["lineage", "show", pids[-1], *d], ["lineage", "diff", pids[0], pids[-1], *d],
            ["lineage", "ancestry", pids[-1], *d], ["lineage", "ancestry", "--json", pids[-1], *d],
            ["lineage", "export", "--format", "json", "--out", str(out / "g.json"), *d],
            ["lineage", "export", "--format", "graphml", "--out", str(out / "g.graphml"), *d],
            ["lineage", "policy", *d], ["archive", "stats", *d], ["archive", "stats", "--json", *d]]


def _qd(args: list[str], capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from qdevolve.cli import main

    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    return code, capfd.readouterr().err


@pytest.mark.parametrize("craft", sorted(_crafted.CRAFTS))
def test_every_reading_command_answers_a_crafted_database_in_one_line(
        craft: str, valid: tuple[Path, str, list[str]], tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    src, _rid, pids = valid
    db = _crafted.craft(Path(shutil.copy(src, tmp_path / f"{craft}.sqlite")), craft)
    before = db.read_bytes()
    for args in _commands(db, tmp_path, pids):
        t0 = time.monotonic()
        code, err = _qd(args, capfd)
        assert time.monotonic() - t0 < 30, f"{craft}: {args[:2]} took too long"
        assert "Traceback" not in err, f"{craft}: {args[:2]}: {err[-1500:]}"
        if craft in REFUSED_ON_OPEN:
            assert code == 2 and REFUSED_ON_OPEN[craft] in err, (craft, args[:2], err)
        lines = [ln for ln in err.strip().splitlines() if ln.strip() and not ln.startswith("warning:")]
        if code != 0:
            assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), (craft, args[:2], err)
    assert db.read_bytes() == before, "a reading command wrote to the database"


@pytest.mark.slow
def test_archive_plot_answers_every_crafted_database_in_one_line(
        valid: tuple[Path, str, list[str]], tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    for craft in sorted(_crafted.CRAFTS):
        db = _crafted.craft(Path(shutil.copy(valid[0], tmp_path / f"{craft}.sqlite")), craft)
        code, err = _qd(["archive", "plot", "--out", str(tmp_path / f"{craft}.png"), "--db", str(db)], capfd)
        assert "Traceback" not in err, (craft, err[-1500:])
        assert code == 0 or (code == 2 and len(err.strip().splitlines()) == 1), (craft, err)


def test_a_valid_database_still_reads(valid: tuple[Path, str, list[str]], tmp_path: Path,
                                      capfd: pytest.CaptureFixture[str]) -> None:
    src, _rid, pids = valid
    for args in _commands(src, tmp_path, pids):
        code, err = _qd(args, capfd)
        assert code == 0, (args[:2], err)


@pytest.mark.parametrize("craft", sorted(REFUSED_ON_OPEN))
def test_store_and_view_refuse_crafted_schema(craft: str, valid: tuple[Path, str, list[str]], tmp_path: Path) -> None:
    from qdevolve.db._view import open_view
    from qdevolve.db.store import open_store

    db = _crafted.craft(Path(shutil.copy(valid[0], tmp_path / "x.sqlite")), craft)
    with pytest.raises(DatabaseError, match=REFUSED_ON_OPEN[craft].replace("(", r"\(")):
        open_store(str(db))
    with pytest.raises(DatabaseError):
        open_view(str(db))


def test_resume_of_a_database_with_a_trigger_is_refused(valid: tuple[Path, str, list[str]], tmp_path: Path,
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    db = _crafted.craft(Path(shutil.copy(valid[0], tmp_path / "x.sqlite")), "trigger")
    code, err = _qd(["resume", "--db", str(db), "--no-progress"], capfd)
    assert code == 2 and "trigger 't'" in err and len(err.strip().splitlines()) == 1, err


_FOREVER = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT COUNT(*) FROM r"


def test_a_statement_is_stopped_after_its_budget_store(valid: tuple[Path, str, list[str]]) -> None:
    from qdevolve.db.store import open_store

    _untrusted.enable_query_budget(0.5)
    store = open_store(str(valid[0]))
    try:
        t0 = time.monotonic()
        with pytest.raises(Exception, match="interrupted"):
            store.execute(_FOREVER)
        assert time.monotonic() - t0 < 10
        assert store.execute("SELECT COUNT(*) FROM programs")[0][0] == 6, "the next statement has its own budget"
    finally:
        store.close()


def test_a_statement_is_stopped_after_its_budget_view(valid: tuple[Path, str, list[str]]) -> None:
    from qdevolve.db._view import open_view

    _untrusted.enable_query_budget(0.5)
    view = open_view(str(valid[0]))
    assert view is not None
    try:
        with pytest.raises(sqlite3.OperationalError, match="interrupted"):
            view._rows(_FOREVER)
        assert view.count_programs(valid[1]) == 6
    finally:
        view.close()


def test_the_budget_counts_database_time_not_time_between_rows(valid: tuple[Path, str, list[str]]) -> None:
    """A consumer pausing between rows of a streamed scan is not stopped: pauses do not count."""
    from qdevolve.db._view import open_view

    _untrusted.enable_query_budget(0.3)
    view = open_view(str(valid[0]))
    try:
        with view.scan_cursor("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r WHERE x < 20000) "
                              "SELECT x FROM r", {}) as cur:
            n = 0
            for _ in cur:
                n += 1
                if n % 5000 == 0:
                    time.sleep(0.4)  # longer than the budget, outside the database
        assert n == 20000
    finally:
        view.close()



def test_postgres_statements_are_bounded(pg_url: str) -> None:
    """PostgreSQL: a reading session carries ``statement_timeout``."""
    from qdevolve.db.store import open_store

    _untrusted.enable_query_budget(1.0)
    store = open_store(pg_url, create=True)
    try:
        t0 = time.monotonic()
        with pytest.raises(Exception, match="statement timeout"):
            store.execute("SELECT pg_sleep(5)")
        assert time.monotonic() - t0 < 4.5
    finally:
        store.close()


def test_the_plain_column_list_matches_the_schema() -> None:
    """The schema check reads table and column names without SQLAlchemy; they must be the
    schema's own."""
    from qdevolve.db import schema as S
    from qdevolve.db._columns import TABLE_COLUMNS

    assert TABLE_COLUMNS == {t.name: tuple(c.name for c in t.columns) for t in S.metadata.sorted_tables}
