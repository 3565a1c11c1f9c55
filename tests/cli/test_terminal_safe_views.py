"""Every view prints stored text safely: run in a real pseudo-terminal against a database
whose names, operators, code, artifacts and errors carry control sequences and bidi overrides."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import tty
from pathlib import Path

import pytest

from qdevolve.db.store import LineageStore
from qdevolve.types import EvalResult, Program

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"     # clipboard write
QUERY = "\x1b[6n"                              # device status query (types into the shell)
CLEAR = "\x1b[2J\x1b[H"                        # clear screen
LINK = "\x1b]8;;http://127.0.0.1/\x1b\\x\x1b]8;;\x1b\\"  # hyperlink
BIDI = "\u202e"                                # right-to-left override
HOSTILE = OSC52 + QUERY + CLEAR + LINK + BIDI + "\r\x00\x08"
SGR = re.compile(rb"\x1b\[[0-9;]*m")           # the styling rich itself emits on a terminal


@pytest.fixture
def hostile_db(tmp_path: Path) -> tuple[Path, str, str]:
    path = tmp_path / "hostile.sqlite"
    st = LineageStore(path, create=True)
    rid = st.create_run(name="run" + HOSTILE, config={"archive": {"type": "map_elites",
                                                                  "feature_dimensions": ["f"]}})
    seed = Program(code=f"# {HOSTILE}\ndef f():\n    return 1\n", run_id=rid, id="a" * 32,
                   operator="seed" + HOSTILE)
    child = Program(code=f"def f():\n    return 2  # {HOSTILE}\n", run_id=rid, id="b" * 32,
                    parent_ids=(seed.id,), generation=1, operator="diff" + HOSTILE, policy_version=0)
    st.write(programs=[seed, child], evaluations=[
        (seed.id, EvalResult(score=1.0, features={"f": 0.5}, metrics={"m" + HOSTILE: 1.0})),
        (child.id, EvalResult(status="error", error="boom" + HOSTILE,
                              artifacts={"stderr": f"line\n{HOSTILE}\nend", "k" + HOSTILE: HOSTILE}))])
    st.add_policy_version(rid, 0, objective="grpo" + HOSTILE, metrics={"loss": 1.0})
    st.close()
    return path, seed.id, child.id


def _in_pty(args: list[str]) -> bytes:
    """Run ``qdevolve ARGS`` with its stdout and stderr on a raw pseudo-terminal; all output."""
    master, slave = pty.openpty()
    tty.setraw(slave)  # no \n -> \r\n translation: any \r seen came from the program
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "200", "LINES": "50"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "qdevolve", *args], stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=120) == 0, b"".join(chunks)[-2000:]
    return b"".join(chunks)


@pytest.mark.slow
def test_no_view_writes_a_raw_control_sequence(hostile_db: tuple[Path, str, str]) -> None:
    path, seed, child = hostile_db
    db = str(path)
    views = [["runs", "list", "--db", db], ["lineage", "tree", "--db", db],
             ["lineage", "show", child, "--db", db],
             ["lineage", "diff", seed, child, "--db", db], ["lineage", "ancestry", child, "--db", db],
             ["lineage", "policy", "--db", db], ["archive", "stats", "--db", db],
             ["runs", "list", "--db", db, "--json"]]
    for args in views:
        out = SGR.sub(b"", _in_pty(args))
        text = out.decode("utf-8", "replace")
        assert "\x1b" not in text, (args, text[:3000])
        for bad in ("\x07", "\r", "\x00", "\x08", BIDI):
            assert bad not in text, (args, repr(bad))
        if args[:2] == ["lineage", "show"] and args[2] == child:
            assert "\\e]52;c;" in text and "\\u202e" in text and "^M" in text  # shown visibly


def test_dot_export_cannot_gain_nodes_from_stored_text(tmp_path: Path) -> None:
    path = tmp_path / "dot.sqlite"
    st = LineageStore(path, create=True)
    rid = st.create_run(name="dot")
    evil = 'x"]; "injected" [label="pwned"]; "y'
    p = Program(code="x = 1\n", run_id=rid, operator=evil + "\n" + HOSTILE)
    st.write(programs=[p])
    st.close()
    out = tmp_path / "g.dot"
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "lineage", "export", "--db", str(path),
                           "--format", "dot", "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert '"injected" [' not in text and "\x1b" not in text and "\n  " + '"injected"' not in text
    node_lines = [ln for ln in text.splitlines() if ln.startswith("  \"") and "->" not in ln]
    assert len(node_lines) == 1  # the one program, however its operator is spelled
    assert text.count('"') % 2 == 0 and '\\"]; \\"injected\\"' in text  # quotes stay inside strings
