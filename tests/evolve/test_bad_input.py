"""Bad input: one clear line naming the file (and key), exit status 2, no evaluation spent."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from .conftest import CONFIG, QDEVOLVE, SEED, write_example


def _qd(*args: str) -> subprocess.CompletedProcess[str]:
    # the examples' configs choose the local sandbox; weaker than the default, so the user's flag says it
    local = ["--sandbox", "local"] if args[:1] == ("run",) and "--sandbox" not in args else []
    return subprocess.run([*QDEVOLVE, *args, *local], capture_output=True, text=True, timeout=120)


CASES = {
    "seed_syntax_error": (dict(seed=SEED.replace("A = 0.5", "A = (0.5")), "initial_program.py"),
    "evaluator_without_evaluate": (dict(evaluator="def score(p):\n    return 1\n"), "evaluator.py"),
    "evaluator_raises_on_seed": (dict(evaluator="def evaluate(p):\n    raise RuntimeError('boom')\n"), "evaluator.py"),
    "config_unknown_key": (dict(config=CONFIG + "bogus_key: 1\n"), "bogus_key"),
    "config_unknown_nested_key": (dict(config=CONFIG.replace("  workers: 1", "  wrokers: 1")), "run"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_example(case: str, tmp_path: Path) -> None:
    kwargs, needle = CASES[case]
    ex = write_example(tmp_path / case, **kwargs)
    db = tmp_path / f"{case}.sqlite"
    r = _qd("run", str(ex), "--db", str(db), "--no-progress")
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, r.stderr
    assert needle in lines[0]
    if case == "config_unknown_key":
        assert "config.yaml" in lines[0]
    if case == "evaluator_raises_on_seed":
        assert "boom" in lines[0] or "RuntimeError" in lines[0]
    assert not db.exists(), "no database (no evaluation) may be left behind by a setup error"


def test_missing_example_dir(tmp_path: Path) -> None:
    r = _qd("run", str(tmp_path / "nope"), "--db", str(tmp_path / "x.sqlite"))
    assert r.returncode == 2
    assert "nope" in r.stderr and "not found" in r.stderr


def test_unknown_plugin_name(tmp_path: Path) -> None:
    ex = write_example(tmp_path / "ex", config=CONFIG)
    r = _qd("run", str(ex), "--db", str(tmp_path / "x.sqlite"), "--selection", "nonexistent_rule")
    assert r.returncode == 2
    assert "nonexistent_rule" in r.stderr and "available" in r.stderr
    assert not (tmp_path / "x.sqlite").exists()


def test_openevolve_config_warns_once(tmp_path: Path) -> None:
    oe = ("max_iterations: 2\nrandom_seed: 1\nlog_level: INFO\n"
          "database:\n  num_islands: 1\n  feature_dimensions: [a, b]\n  elite_selection_ratio: 0.1\n"
          "evaluator:\n  timeout: 10\n  parallel_evaluations: 1\n  use_llm_feedback: false\n")
    ex = write_example(tmp_path / "oe", config=oe)
    r = _qd("run", str(ex), "--db", str(tmp_path / "oe.sqlite"), "--no-progress", "--sandbox", "local")
    assert r.returncode == 0, r.stderr
    warn = [ln for ln in r.stderr.splitlines() if "not supported" in ln]
    assert len(warn) == 1
    assert "database.elite_selection_ratio" in warn[0] and "evaluator.use_llm_feedback" in warn[0]


# -- every bad input is one line, exit 2, before the seed is evaluated, nothing left behind --
DEEP = "run:\n  iterations: 2\nprompt:\n  x: " + "[" * 5000 + "]" * 5000 + "\n"
BOMB = ("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
        "run: {iterations: 2}\n")
RAISING_PLUGIN = '''import qdevolve


@qdevolve.registry.selection("explodes")
class Explodes:
    def __init__(self):
        raise ValueError("explodes cannot be built: missing setting 'temperature'")

    def select(self, candidates, rng, n=1):
        return list(candidates)[:n]
'''

OPTION_CASES = {
    "iterations_negative": (["--iterations", "-3"], "iterations"),
    "workers_zero": (["--workers", "0"], "workers"),
    "wall_time_negative": (["--wall-time", "-1"], "wall time"),
    "seed_negative": (["--seed", "-1"], "seed"),
    "seed_huge": (["--seed", str(10**23)], "seed"),
}

CONFIG_CASES = {
    "iterations_inf": (CONFIG.replace("iterations: 12", "iterations: .inf"), "run.iterations"),
    "iterations_1e26": (CONFIG.replace("iterations: 12", "iterations: 1e26"), "iterations"),
    "openevolve_max_iterations_inf": ("max_iterations: .inf\n", "max_iterations"),
    "limits_wall_negative": (CONFIG.replace("wall_s: 10", "wall_s: -5"), "limits.wall_s"),
    "deep": (DEEP, "nested"),
    "alias_bomb": (BOMB, "expands"),
}


@pytest.mark.parametrize("case", sorted(OPTION_CASES))
def test_bad_option_values(case: str, tmp_path: Path) -> None:
    args, needle = OPTION_CASES[case]
    ex = write_example(tmp_path / "ex")
    db = tmp_path / "x.sqlite"
    r = _qd("run", str(ex), "--db", str(db), "--no-progress", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr
    assert not db.exists()


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_bad_config_values(case: str, tmp_path: Path) -> None:
    config, needle = CONFIG_CASES[case]
    ex = write_example(tmp_path / "ex", config=config)
    db = tmp_path / "x.sqlite"
    r = _qd("run", str(ex), "--db", str(db), "--no-progress")
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "config.yaml" in lines[0], r.stderr
    assert not db.exists()


def test_non_utf8_config(tmp_path: Path) -> None:
    ex = write_example(tmp_path / "ex")
    (ex / "config.yaml").write_bytes(b"run:\n  name: caf\xe9\n")
    r = _qd("run", str(ex), "--db", str(tmp_path / "x.sqlite"))
    assert r.returncode == 2 and "not UTF-8" in r.stderr and "line 2" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_plugin_raising_in_init_is_one_line(tmp_path: Path) -> None:
    ex = write_example(tmp_path / "ex")
    plugin = tmp_path / "explodes.py"
    plugin.write_text(RAISING_PLUGIN)
    db = tmp_path / "x.sqlite"
    r = _qd("run", str(ex), "--db", str(db), "--plugin", str(plugin), "--selection", "explodes")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "selection" in lines[0] and "temperature" in lines[0], r.stderr
    assert not db.exists()


def test_oversized_seed(tmp_path: Path) -> None:
    ex = write_example(tmp_path / "ex")
    with open(ex / "initial_program.py", "a") as fh:
        fh.write("# " + "x" * (3 << 20) + "\n")
    r = _qd("run", str(ex), "--db", str(tmp_path / "x.sqlite"))
    assert r.returncode == 2 and "at most" in r.stderr and "initial_program.py" in r.stderr


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink_loop", "device"])
def test_evaluator_that_is_not_a_file(kind: str, tmp_path: Path) -> None:
    import os

    ex = write_example(tmp_path / "ex")
    ev = ex / "evaluator.py"
    ev.unlink()
    if kind == "directory":
        ev.mkdir()
    elif kind == "fifo":
        os.mkfifo(ev)
    elif kind == "device":
        ev.symlink_to("/dev/null")
    else:
        ev.symlink_to(ev)
    r = _qd("run", str(ex), "--db", str(tmp_path / "x.sqlite"))
    assert r.returncode == 2, r.stderr
    expected = {"directory": "directory", "fifo": "FIFO", "symlink_loop": "symbolic link loop",
                "device": "device"}[kind]
    assert expected in r.stderr and "does not exist" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("body, needle", [
    ("import sys\nsys.exit(4)\n", "exit(4)"),
    ("import time\nwhile True:\n    time.sleep(1)\n", "did not finish"),
    ("raise RuntimeError('no such setting')\n", "no such setting"),
])
@pytest.mark.slow
def test_plugin_file_that_exits_hangs_or_fails_at_import(body: str, needle: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from qdevolve.errors import PluginError
    from qdevolve.evolve.setup.validate import check_plugin_file

    plugin = tmp_path / "bad_plugin.py"
    plugin.write_text(body)
    with pytest.raises(PluginError, match=re.escape(needle)) as info:
        check_plugin_file(plugin, timeout_s=5)
    assert "\n" not in str(info.value) and "bad_plugin.py" in str(info.value)


def test_plugin_file_exiting_at_import_via_cli(tmp_path: Path) -> None:
    ex = write_example(tmp_path / "ex")
    plugin = tmp_path / "exits.py"
    plugin.write_text("import sys\nsys.exit(0)\n")
    r = _qd("run", str(ex), "--db", str(tmp_path / "x.sqlite"), "--plugin", str(plugin))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "exit(0)" in r.stderr
    assert not (tmp_path / "x.sqlite").exists()


def test_resume_with_a_bad_budget(tmp_path: Path) -> None:
    r = _qd("resume", "--db", str(tmp_path / "none.sqlite"), "--iterations", "-5")
    assert r.returncode == 2 and "iterations" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "none.sqlite").exists()
