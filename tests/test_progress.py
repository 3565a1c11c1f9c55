"""Long phases are visible: a bar on a terminal as soon as they start, one line elsewhere."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from qdevolve.progress import phase

ROOT = Path(__file__).resolve().parents[1]


def test_without_a_terminal_a_phase_is_a_start_line_and_an_end_line() -> None:
    out = io.StringIO()
    with phase("pre-training the base", total=3, console=Console(file=io.StringIO()), stream=out) as advance:
        assert out.getvalue() == "pre-training the base ...\n"  # shown when the phase starts
        for i in range(3):
            advance(i + 1)  # no line per step
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and re.fullmatch(r"pre-training the base: done in \d+\.\d s", lines[1])
    out = io.StringIO()
    with pytest.raises(RuntimeError), phase("building", console=Console(file=io.StringIO()), stream=out):
        raise RuntimeError("boom")
    assert out.getvalue().splitlines()[1].startswith("building: failed after ")


def test_on_a_terminal_a_phase_is_a_bar() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100)
    with phase("pre-training the base", total=4, console=console, stream=io.StringIO()) as advance:
        for i in range(4):
            advance(i + 1)
    text = screen.getvalue()
    assert "pre-training the base" in text and "4/4" in text


def read_pty(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, list[tuple[float, str]]]:
    """Run ``cmd`` with a pseudo-terminal as stdin/stdout/stderr; its exit status and the
    ``(seconds since start, text)`` chunks it wrote."""
    master, slave = pty.openpty()
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True)
    os.close(slave)
    chunks: list[tuple[float, str]] = []
    try:
        while True:
            if time.monotonic() - start > timeout:
                proc.kill()
                raise AssertionError(f"{cmd} ran past {timeout} s; output: {''.join(c for _, c in chunks)[-2000:]}")
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not data:
                    break
                chunks.append((time.monotonic() - start, data.decode(errors="replace")))
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
    return proc.wait(timeout=30), chunks


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_first_joined_run_shows_progress_from_pre_training_to_the_end(tmp_path: Path) -> None:
    """``qdevolve run examples/expr_evolution --iterations 64`` with an empty cache, in a pty:
    the base's pre-training bar appears at once, then the evolution bar, then the summary."""
    env = {**os.environ, "COLUMNS": "120", "LINES": "40", "TERM": "xterm"}
    env.pop("QDEVOLVE_CACHE_DIR", None)
    t0 = time.monotonic()
    rc, chunks = read_pty([sys.executable, "-m", "qdevolve", "run", str(ROOT / "examples" / "expr_evolution"),
                           "--iterations", "64", "--db", str(tmp_path / "run.sqlite"),
                           "--cache-dir", str(tmp_path / "cache")], cwd=tmp_path, env=env, timeout=1100)
    wall = time.monotonic() - t0
    text = "".join(c for _, c in chunks)
    assert rc == 0, text[-3000:]
    first_pretrain = next(t for t, c in chunks if "pre-training the tiny base policy" in c)
    assert first_pretrain < 30, f"the pre-training bar appeared after {first_pretrain:.1f} s"  # import time included
    assert any(re.search(r"\b\d+/500\b", c) for _, c in chunks), "the pre-training bar counts its steps"
    times = [t for t, _ in chunks]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert max(gaps, default=0) < 30, f"the terminal showed nothing for {max(gaps):.1f} s"
    assert "evolving" in text and "qdevolve run summary" in text
    assert list((tmp_path / "cache").glob("expr_edit-*/qdevolve_tiny.json"))
    print(f"joined run with pre-training: {wall:.1f} s wall")
