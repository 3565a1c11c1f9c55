"""A failing seed leads somewhere: the last frames of its traceback (bounded, escaped) and
the exact ``qdevolve sandbox exec`` command that reproduces it."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from qdevolve.evolve.setup.seed_failure import (
    MAX_FRAMES,
    last_frames,
    reproduce_command,
    seed_failure,
)
from qdevolve.sandbox import SandboxLimits
from qdevolve.types import EvalResult

from .conftest import QDEVOLVE, SEED, write_example

# ten distinct frames (a recursion would be folded into "[Previous line repeated ...]")
DEEP_EVALUATOR = "def level0(d):\n    return d['46\\x1b[2J']\n\n\n" + "".join(
    f"def level{i}(d):\n    return level{i - 1}(d)\n\n\n" for i in range(1, 10)) + (
    "def evaluate(program_path):\n    return {'combined_score': level9({})}\n")


def _traceback(frames: int) -> str:
    lines = ["Traceback (most recent call last):",
             '  File "/tmp/qdevolve-local-x/runner/runner.py", line 363, in finish',
             "    body = _run_evaluator(...)"]
    for i in range(frames):
        lines += [f'  File "/qdevolve/evaluator/evaluator.py", line {i + 1}, in level', f"    return level(d, {i})"]
    return "\n".join(lines + ["KeyError: '\x1b]52;c;aGk=\x07'"]) + "\n"


def test_last_frames_is_bounded_escaped_and_drops_the_runner() -> None:
    text = last_frames(_traceback(30), evaluator=Path("/home/me/ex/evaluator.py"))
    assert text.count('File "') == MAX_FRAMES
    assert "earlier frame(s) left out" in text
    assert "runner.py" not in text
    assert "/home/me/ex/evaluator.py" in text and "/qdevolve/evaluator/" not in text
    assert "\x1b" not in text and "\x07" not in text and "\\e]52" in text
    assert len(last_frames("x" * 100_000)) <= 3000


def test_reproduce_command_carries_the_run_settings() -> None:
    cmd = reproduce_command(Path("my dir/initial_program.py"), Path("my dir/evaluator.py"), "bwrap",
                            SandboxLimits(wall_s=12, memory_mb=2048), (0.5, 0.8))
    assert shlex.split(cmd) == ["qdevolve", "sandbox", "exec", "my dir/initial_program.py", "--evaluator",
                                "my dir/evaluator.py", "--backend", "bwrap", "--wall-s", "12",
                                "--memory-mb", "2048", "--cascade", "0.5,0.8"]


def test_seed_failure_without_score_says_why() -> None:
    err = seed_failure(Path("s.py"), Path("e.py"), EvalResult(status="ok", score=None), sandbox_type="local",
                       limits=SandboxLimits(), cascade=None)
    assert "no combined_score" in str(err)
    assert "qdevolve sandbox exec s.py --evaluator e.py --backend local" in err.detail


@pytest.mark.slow
def test_failing_seed_prints_frames_and_a_command_that_reproduces_it(tmp_path: Path) -> None:
    ex = write_example(tmp_path / "ex", evaluator=DEEP_EVALUATOR)
    db = tmp_path / "run.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(ex), "--sandbox", "local", "--db", str(db), "--no-progress"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert not db.exists()
    err = r.stderr
    assert "\x1b" not in err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "KeyError" in errors[0]
    assert err.count('File "') == MAX_FRAMES  # bounded: 10 evaluator frames, 4 shown
    assert f'File "{ex / "evaluator.py"}", line 2, in level0' in err
    assert "runner.py" not in err
    command = next(ln.split(": ", 1)[1] for ln in err.splitlines() if "qdevolve sandbox exec" in ln)
    argv = shlex.split(command)
    assert argv[:3] == ["qdevolve", "sandbox", "exec"] and "--backend" in argv
    again = subprocess.run([*QDEVOLVE, *argv[1:]], capture_output=True, text=True, timeout=120)
    assert again.returncode == 1
    assert "status:   error" in again.stdout and "KeyError" in again.stdout
    assert again.stdout.count("in level") >= 10  # the full traceback


@pytest.mark.slow
def test_a_seed_that_raises_shows_its_own_traceback(tmp_path: Path) -> None:
    seed = SEED.replace("def value():\n", "def value():\n    raise ValueError('seed broke')\n")
    ex = write_example(tmp_path / "ex", seed=seed)
    r = subprocess.run([*QDEVOLVE, "run", str(ex), "--sandbox", "local", "--db", str(tmp_path / "r.sqlite"), "--no-progress"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "ValueError: seed broke" in r.stderr
    assert "qdevolve sandbox exec" in r.stderr


@pytest.mark.slow
def test_sandbox_exec_runs_a_c_seed_as_c() -> None:
    """The reproduce command works for other languages: ``sandbox exec`` takes the language
    from the file's extension (a C seed was run as Python before)."""
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    ex = Path(__file__).resolve().parents[2] / "examples" / "c_sine_approx"
    r = subprocess.run([*QDEVOLVE, "sandbox", "exec", str(ex / "initial_program.c"), "--evaluator",
                        str(ex / "evaluator.py"), "--backend", "local"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "status:   ok" in r.stdout
