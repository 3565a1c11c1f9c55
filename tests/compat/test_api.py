"""The Python API: run_evolution with paths, source strings, a plain function, several seeds."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import qdevolve
from qdevolve.errors import ConfigError

from .conftest import METRICS_EVALUATOR, SEED, write


def score_abc(program_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("cand", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a, b, c = mod.values()
    return {"combined_score": 1.0 / (1.0 + (a - 3) ** 2 + (b + 1) ** 2), "features": {"a": a, "b": b}}


CONFIG = {"run": {"iterations": 8, "workers": 1, "seed": 4},
          "archive": {"type": "map_elites", "feature_dimensions": ["a", "b"], "ranges": [[-10, 10], [-10, 10]],
                      "bins": 5},
          "sandbox": {"type": "local"}}


def test_function_evaluator_and_several_source_seeds(tmp_path: Path) -> None:
    second = SEED.replace("A = 0.5", "A = 2.5")
    res = qdevolve.run_evolution([SEED, second], score_abc, config=CONFIG, db=tmp_path / "api.sqlite")
    assert isinstance(res, qdevolve.EvolutionResult)
    assert res.db == tmp_path / "api.sqlite" and res.db.exists()
    assert res.seed_score == pytest.approx(1.0 / (1.0 + 0.25 + 9.0)), "the better seed's score"
    assert res.best_score >= res.seed_score and res.best_code is not None
    assert res.archive and all(set(e.features) == {"a", "b"} for e in res.archive)
    con = sqlite3.connect(res.db)
    seeds = con.execute("SELECT COUNT(*) FROM programs WHERE operator = 'seed'").fetchone()[0]
    children = con.execute("SELECT COUNT(*) FROM programs WHERE operator != 'seed'").fetchone()[0]
    assert (seeds, children) == (2, 8)
    # The run is an ordinary run: resumable from its database by the CLI.
    r = subprocess.run([sys.executable, "-m", "qdevolve", "resume", "--db", str(res.db), "--iterations", "10",
                        "--no-progress"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert con.execute("SELECT COUNT(*) FROM programs WHERE operator != 'seed'").fetchone()[0] == 10


def test_paths_and_evaluator_file(tmp_path: Path) -> None:
    ex = write(tmp_path / "files", {"initial_program.py": SEED, "evaluator.py": METRICS_EVALUATOR})
    res = qdevolve.run_evolution(ex / "initial_program.py", str(ex / "evaluator.py"),
                                 config={"archive": {"type": "map_elites", "feature_dimensions": ["spread"]}},
                                 db=tmp_path / "p.sqlite", iterations=3, workers=1, sandbox="local")
    assert res.by_status.get("ok", 0) >= 1 and res.stop_reason == "budget"


def test_bad_api_input_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "bad.sqlite"
    with pytest.raises(ConfigError, match="lambda|def"):
        qdevolve.run_evolution(SEED, lambda p: {"combined_score": 1.0}, db=db)
    factor = 2.0

    def closure(program_path):
        return {"combined_score": factor}

    with pytest.raises(ConfigError, match="factor"):
        qdevolve.run_evolution(SEED, closure, db=db)
    with pytest.raises(ConfigError, match="iterations"):
        qdevolve.run_evolution(SEED, score_abc, config=CONFIG, db=db, iterations=-3)
    with pytest.raises(qdevolve.QdevolveError, match="not found"):
        qdevolve.run_evolution(tmp_path / "missing.py", score_abc, db=db)
    assert not db.exists() and not (tmp_path / "bad.sqlite.example").exists()
