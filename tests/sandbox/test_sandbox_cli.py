"""``qdevolve sandbox exec|check`` through the real command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def needs_bwrap() -> None:
    from qdevolve.sandbox.bwrap import bwrap_available

    if not bwrap_available():
        pytest.skip("BWRAP TESTS SKIPPED: bubblewrap is missing or cannot create namespaces here")


def qd(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qdevolve", "sandbox", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("backend", ["local", "bwrap"])
def test_exec_json_builtin_evaluator(tmp_path, backend):
    if backend == "bwrap":
        needs_bwrap()
    prog = tmp_path / "p.py"
    prog.write_text("print('hello from the sandbox')\n")
    r = qd("exec", str(prog), "--backend", backend, "--wall-s", "5", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["backend"] == backend and out["status"] == "ok" and out["score"] == 1.0
    assert out["artifacts"]["stdout"] == "hello from the sandbox\n"
    assert {"metrics", "error", "runtime_s"} <= set(out)


def test_exec_with_evaluator_and_failure_exit_status(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("while True:\n    pass\n")
    ev = tmp_path / "evaluator.py"
    ev.write_text("import runpy\ndef evaluate(path):\n    runpy.run_path(path)\n    return {'combined_score': 1}\n")
    r = qd("exec", str(prog), "--evaluator", str(ev), "--backend", "local", "--wall-s", "2", "--cpu-s", "1")
    assert r.returncode == 1
    assert "status:   timeout" in r.stdout


def test_exec_setup_errors_exit_2(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("x = 1\n")
    bad = tmp_path / "ev.py"
    bad.write_text("def nothing(): pass\n")
    r = qd("exec", str(prog), "--evaluator", str(bad))
    assert r.returncode == 2 and "defines no evaluate" in r.stderr
    r = qd("exec", str(tmp_path / "missing.py"))
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_check_prints_table(tmp_path):
    needs_bwrap()
    r = qd("check", "--backend", "bwrap", "--only", "forge_record,env_secrets,cpu_loop")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].split() == ["attack", "expected", "got", "seconds"]
    assert any(line.startswith("forge_record") and "invalid" in line and "PASS" in line for line in lines)
    assert "4/4 passed" in r.stdout


def test_check_unknown_attack():
    r = qd("check", "--backend", "local", "--only", "nope")
    assert r.returncode == 2 and "unknown attack" in r.stderr


def test_exec_prints_candidate_output_terminal_safe(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("import sys\nsys.stdout.write('title\\x1b]0;pwned\\x07 clip\\x1b]52;c;ZXZpbA==\\x07 nul\\x00 cr\\r "
                    "query\\x1b[6n bidi\\u202e end\\n')\nsys.stderr.write('err\\x1b[2J\\n')\n")
    r = qd("exec", str(prog), "--backend", "local", "--wall-s", "10")
    assert r.returncode == 0, r.stdout + r.stderr
    for raw in ("\x1b", "\x07", "\x00", "\r", "\u202e"):
        assert raw not in r.stdout
    assert "\\e]52;c;" in r.stdout and "^@" in r.stdout and "^M" in r.stdout and "\\u202e" in r.stdout
