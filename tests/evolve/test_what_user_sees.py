"""What a user of ``qdevolve run`` sees: the progress count advances during the run (watched
through a real pseudo-terminal), the fail-fast line quotes a real message, a 0-byte database
file starts a new run, and the summary's hint commands are whole lines that paste."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from rich.console import Console

from qdevolve.cli._db import check_new_run
from qdevolve.errors import ConfigError
from qdevolve.evolve.report.display import print_summary
from qdevolve.evolve.report.ledger import RunLedger
from qdevolve.evolve.report.summary import RunSummary
from qdevolve.types import EvalResult

from .conftest import QDEVOLVE, write_example

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")

# Slow enough that a run of 30 children lasts several display refreshes (0.25 s each).
SLOW_EVALUATOR = '''import importlib.util
import time


def evaluate(program_path):
    time.sleep(0.08)
    spec = importlib.util.spec_from_file_location("cand", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"combined_score": float(mod.value()), "features": {"a": float(mod.A), "b": float(mod.B)}}
'''


def _run_in_pty(argv: list[str], timeout: float) -> tuple[list[tuple[float, str]], int]:
    """Run ``argv`` with a pseudo-terminal as stdin/stdout/stderr; return what the terminal
    showed, in chunks stamped with the time they arrived, and the exit status."""
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="40")
    env.pop("NO_COLOR", None)
    env.pop("CI", None)  # rich treats CI as a terminal without cursor control
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks: list[tuple[float, str]] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append((time.monotonic(), data.decode("utf-8", "replace")))
            elif proc.poll() is not None:
                break
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return chunks, rc


@pytest.mark.slow
def test_progress_count_advances_while_the_run_runs(tmp_path: Path) -> None:
    ex = write_example(tmp_path / "tiny", evaluator=SLOW_EVALUATOR)
    total = 30
    chunks, rc = _run_in_pty([*QDEVOLVE, "run", str(ex), "--sandbox", "local", "--db", str(tmp_path / "r.sqlite"),
                              "--iterations", str(total), "--workers", "1"], timeout=240)
    text = _ANSI.sub("", "".join(c for _, c in chunks))
    assert rc == 0, text[-3000:]
    summary_at = next(t for t, c in chunks if "run summary" in _ANSI.sub("", c))
    seen: list[int] = []  # the counts the bar showed, in order, before the summary printed
    for t, chunk in chunks:
        if t >= summary_at:
            break
        seen += [int(n) for n in re.findall(rf"evolving\S*\s.*?(\d+)/{total}\b", _ANSI.sub("", chunk))]
    middle = sorted({n for n in seen if 0 < n < total})
    assert len(middle) >= 3, f"the bar showed {seen} during the run:\n{text[-2000:]}"
    assert seen == sorted(seen), seen  # it only goes forward
    assert seen[-1] == total


def test_fail_fast_quotes_the_first_real_message() -> None:
    led = RunLedger(budget=10)
    messages = ["usage.prompt_tokens = -1e9 is outside [0, 100000]",
                "usage.prompt_tokens = -2e9 is outside [0, 100000]",
                "usage.prompt_tokens = -3e9 is outside [0, 100000]"]
    common = None
    for m in messages:
        led.evaluated += 1
        common = led.early_failure(EvalResult(status="invalid", error=m + "\nmore detail"), limit=3)
    assert common == messages[0]


def test_fail_fast_needs_one_reason() -> None:
    led = RunLedger(budget=10)
    common = None
    for m in ["port 8000 refused", "disk full"]:
        led.evaluated += 1
        common = led.early_failure(EvalResult(status="error", error=m), limit=2)
    assert common is None


def test_a_zero_byte_database_file_is_a_new_run(tmp_path: Path) -> None:
    empty = tmp_path / "made-by-touch.sqlite"
    empty.touch()
    check_new_run(str(empty))  # accepted
    used = tmp_path / "used.sqlite"
    sqlite3.connect(used).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(ConfigError, match="already exists"):
        check_new_run(str(used))


@pytest.mark.slow
def test_run_starts_in_a_zero_byte_database_file(tmp_path: Path) -> None:
    ex = write_example(tmp_path / "tiny")
    db = tmp_path / "empty.sqlite"
    db.touch()
    r = subprocess.run([*QDEVOLVE, "run", str(ex), "--sandbox", "local", "--db", str(db), "--iterations", "3", "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM programs").fetchone()[0] == 4


def test_hint_commands_are_whole_lines_in_an_80_column_terminal(tmp_path: Path) -> None:
    db = tmp_path / ("a-long-directory-name-of-some-experiment-" * 2) / "circle_packing-20260101-120000.sqlite"
    summary = RunSummary(run_id="r" * 32, db=str(db), evaluations=5, budget=4, seed_score=1.0, best_score=2.0,
                         best_program_id="0123456789abcdef" * 2, by_status={"ok": 5}, elapsed_s=1.0)
    out = io.StringIO()
    print_summary(summary, Console(file=out, width=80, force_terminal=True, color_system="truecolor"))
    lines = out.getvalue().splitlines()
    assert all("\x1b" not in ln for ln in lines if ln.startswith("  qdevolve "))  # no colour in a command
    for hint in (f"qdevolve lineage tree --db {db}", f"qdevolve lineage show 0123456789ab --db {db}",
                 f"qdevolve archive stats --db {db}", f"qdevolve archive plot --db {db} --out archive.png",
                 f"qdevolve resume --db {db} --iterations N"):
        assert any(ln.strip().startswith(hint) for ln in lines), (hint, lines)


def test_the_summary_table_shows_long_values_whole_in_80_columns(tmp_path: Path) -> None:
    """A long database path and a model named by its path wrap inside the value column; neither
    is cut with an ellipsis, and a long model name does not squeeze the other rows."""
    db = tmp_path / ("a-long-directory-name-of-some-experiment-" * 2) / "circle_packing-20260101-120000.sqlite"
    model = "/root/.cache/qdevolve/tiny/expr_editor-with-a-long-name"
    summary = RunSummary(run_id="r" * 32, db=str(db), evaluations=5, budget=4, seed_score=1.0, best_score=2.0,
                         best_program_id="0123456789abcdef" * 2, by_status={"ok": 5}, elapsed_s=1.0,
                         stats={"usage": {"models": {model: {"calls": 3, "prompt_tokens": 10,
                                                             "completion_tokens": 5, "cost": 0.0}}}})
    out = io.StringIO()
    print_summary(summary, Console(file=out, width=80))
    table = out.getvalue().split("Inspect it:")[0]
    assert "\u2026" not in table, table
    values = "".join("".join(ln.split("\u2502")[2].split()) for ln in table.splitlines() if ln.count("\u2502") == 3)
    assert str(db) in values and f"{model}:3calls" in values, table  # compared without the wrapping's spaces


def test_progress_outside_a_terminal_is_whole_lines_never_cut() -> None:
    """Piped (``make run | cat``), a 40-column console: each line gives the whole count, the
    budget and every failure status; a line per tenth of the budget and one at the end."""
    from collections import Counter

    from qdevolve.evolve.report.display import ProgressDisplay

    led = RunLedger(budget=2000)
    led.best_score = 1.23456
    out = io.StringIO()
    console = Console(file=out, width=40)  # a file: not a terminal
    with ProgressDisplay(led, console=console, stats=lambda: {"coverage": 0.406}) as refresh:
        for n in range(1, 1137):
            led.evaluated = n
            led.by_status = Counter({"ok": n - n // 10 - n // 50, "error": n // 10, "timeout": n // 50})
            refresh()
    lines = [ln for ln in out.getvalue().splitlines() if ln]
    assert all(ln.startswith("evolving ") for ln in lines), lines
    counts = [re.match(r"evolving (\d+)/2000 \(", ln).group(1) for ln in lines]
    assert counts == ["200", "400", "600", "800", "1000", "1136"], lines
    assert lines[-1].startswith("evolving 1136/2000 (56.8%) ") and "best 1.235 cov 40.6%" in lines[-1]
    assert "| fail error:113 timeout:22 " in lines[-1] and "\u2026" not in out.getvalue()


@pytest.mark.slow
def test_a_piped_run_prints_whole_progress_lines(tmp_path: Path) -> None:
    ex = write_example(tmp_path / "tiny")
    proc = subprocess.run([*QDEVOLVE, "run", str(ex), "--db", str(tmp_path / "p.sqlite"), "--iterations", "20",
                           "--workers", "1", "--sandbox", "local"], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "COLUMNS": "30"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("evolving")]
    assert lines and lines[-1].startswith("evolving 20/20 (100.0%) "), proc.stderr
    assert all(re.match(r"evolving \d+/20 \(\d+\.\d%\) \S+ ev/s best ", ln) for ln in lines), lines
    assert "\u2026" not in proc.stderr


def test_the_gain_is_no_percentage_of_a_near_zero_seed_score() -> None:
    """The agents example's seed scores 0.014 and its best 0.32: "+2210 %" says nothing; the
    summary gives the absolute gain alone, and a percentage where the seed is not near 0."""
    def gain_row(seed: float, best: float) -> str:
        summary = RunSummary(run_id="r" * 32, db="x.sqlite", evaluations=2, budget=1, seed_score=seed,
                             best_score=best, best_program_id=None, by_status={"ok": 2}, elapsed_s=1.0)
        out = io.StringIO()
        print_summary(summary, Console(file=out, width=120))
        return next(ln for ln in out.getvalue().splitlines() if "gain over seed" in ln)

    assert "+0.308647 " in gain_row(0.0139606, 0.322608) and "%" not in gain_row(0.0139606, 0.322608)
    assert "+0.5 (+50.00%)" in gain_row(1.0, 1.5)
    assert "%" not in gain_row(0.0, 0.25)
