"""Programs in other languages: the seed's extension picks the language, end to end in C."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example
from qdevolve.languages import language_for_path, language_named
from qdevolve.testing.scripted_server import ScriptedServer
from qdevolve.testing.scripts import ScriptedModel

from .conftest import QDEVOLVE

ROOT = Path(__file__).resolve().parents[2]
C_EXAMPLE = ROOT / "examples" / "c_sine_approx"


def test_language_table() -> None:
    assert language_for_path("initial.go").name == "go"
    assert language_for_path("x.F90").name == "fortran"
    assert language_named("golang").name == "go"
    assert language_named("c").marker("EVOLVE-BLOCK-START") == "// EVOLVE-BLOCK-START"
    with pytest.raises(ValueError, match="known extensions"):
        language_for_path("prog.xyz")


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("sandbox", ["local", "bwrap"])
def test_c_example_evolves_with_a_model(tmp_path: Path, sandbox: str) -> None:
    if sandbox == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bwrap not installed")
    ex = load_example(C_EXAMPLE)
    assert ex.language == "c"
    requests: list[dict] = []
    model = ScriptedModel(seed=2, edits=2)

    def script(req: dict) -> str:
        requests.append(req)
        return model(req)

    with ScriptedServer(script) as server:
        cfg = ex.config.with_overrides(iterations=8, workers=2, sandbox={"type": sandbox},
                                       backend={"type": "openai", "api_base": server.url, "model": "scripted"})
        store = LineageStore(tmp_path / "c.sqlite", create=True)
        evo = Evolution.start(ex, cfg, store, progress=False)
        try:
            summary = evo.run()
        finally:
            evo.close()
            store.close()
    con = sqlite3.connect(tmp_path / "c.sqlite")
    langs = {r[0] for r in con.execute("SELECT language FROM programs")}
    assert langs == {"c"}, "every program of the run is C"
    statuses = [r[0] for r in con.execute(
        "SELECT e.status FROM evaluations e JOIN programs p ON p.id = e.program_id WHERE p.operator != 'seed'")]
    assert len(statuses) == 8 and statuses.count("ok") >= 3, statuses
    user = [m["content"] for r in requests for m in r["messages"] if m["role"] == "user"]
    assert user and all("written in C." in u and "```c\n" in u for u in user)
    assert summary.best_score is not None and summary.best_score >= summary.seed_score


def test_ast_mutator_refuses_a_c_seed_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(C_EXAMPLE), "--db", str(db), "--mutation", "ast",
                        "--no-progress"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Python programs only" in lines[0] and "initial_program.c" in lines[0]
    assert not db.exists()


def test_limits_env_adds_to_the_sandbox_environment(tmp_path: Path) -> None:
    from qdevolve.evolve.core.engine import make_limits
    from qdevolve.evolve.setup.config import parse_config

    cfg = parse_config({"limits": {"wall_s": 10, "env": {"GOCACHE": "/tmp/go-cache", "N": 3}}})
    env = dict(make_limits(cfg.limits).env)
    assert env["GOCACHE"] == "/tmp/go-cache" and env["N"] == "3" and env["PATH"].startswith("/usr/local/bin")
    with pytest.raises(Exception, match="not an environment variable name"):
        make_limits({"wall_s": 1, "env": {"BAD NAME": "x"}})
