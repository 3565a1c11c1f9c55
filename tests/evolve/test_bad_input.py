"""Bad input: one clear line naming the file (and key), exit status 2, no evaluation spent."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import CONFIG, QDEVOLVE, SEED, write_example


def _qd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QDEVOLVE, *args], capture_output=True, text=True, timeout=120)


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
