"""An OpenEvolve example runs unmodified: offline with no flag, with its model once trusted.

Every OpenEvolve example's config names its server (``llm.api_base``) and its key
(``api_key: ${VAR}``). Both act on the host, so an example's own config may not use them
without the user's word; but ``--mutation ast`` uses no model, so there they are a warning,
never an exit. With the model, ``qdevolve trust DIR`` (or ``--trust``) is the one step.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from qdevolve.errors import ConfigError
from qdevolve.evolve.setup.consent import settle_trust
from qdevolve.evolve.setup.example import load_example

from .conftest import METRICS_EVALUATOR, OPENEVOLVE_LLM_CONFIG, QDEVOLVE, SEED, write

KEY_ENV = "QD_TEST_LLM_API_KEY"
KEY = "sk-test-not-a-real-key"
FAR_SERVER = "https://generativelanguage.googleapis.com/v1beta/openai/"


def _example(root: Path, api_base: str = FAR_SERVER, iterations: int = 3) -> Path:
    return write(root, {"initial_program.py": SEED, "evaluator.py": METRICS_EVALUATOR,
                        "config.yaml": OPENEVOLVE_LLM_CONFIG.format(iterations=iterations, api_base=api_base,
                                                                    key_env=KEY_ENV, model="scripted")})


def _qd(*args: str, env_key: bool = True, cwd: Path) -> subprocess.CompletedProcess[str]:
    import os

    env = dict(os.environ, **({KEY_ENV: KEY} if env_key else {}))
    return subprocess.run([*QDEVOLVE, *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL)


def test_the_fixture_is_read_as_openevolve_and_its_host_keys_are_named(tmp_path: Path) -> None:
    ex = _example(tmp_path / "oe")
    example = load_example(ex)
    assert example.config.backend["api_base"] == FAR_SERVER and example.config.backend["api_key_env"] == KEY_ENV
    with pytest.raises(ConfigError) as info:
        settle_trust(example, example.config, None)
    msg = str(info.value)
    assert "'backend.api_base'" in msg and "'backend.api_key_env'" in msg and "qdevolve trust" in msg
    offline = example.config.with_overrides(mutation=[{"type": "ast", "weight": 1.0}])
    settled = settle_trust(example, offline, None)
    assert len(settled.warnings) == 1 and settled.config.backend is None


@pytest.mark.slow
def test_offline_with_no_flag_is_a_warning_not_an_exit(tmp_path: Path) -> None:
    ex = _example(tmp_path / "oe")
    db = tmp_path / "ast.sqlite"
    r = _qd("run", str(ex), "--mutation", "ast", "--db", str(db), "--no-progress", "--sandbox", "local", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    idle = [ln for ln in r.stderr.splitlines() if "no effect" in ln]
    assert len(idle) == 1 and "backend.api_base" in idle[0] and KEY_ENV in idle[0], r.stderr
    config = json.loads(sqlite3.connect(db).execute("SELECT config FROM runs").fetchone()[0])
    assert config["backend"] is None, "the server the example named is not kept for later"


@pytest.mark.slow
@pytest.mark.parametrize("grant", ["store", "flag"])
def test_with_the_model_after_one_step(grant: str, tmp_path: Path) -> None:
    from qdevolve.testing.scripted_server import ScriptedServer
    from qdevolve.testing.scripts import ScriptedModel

    with ScriptedServer(ScriptedModel(seed=0)) as server:
        ex = _example(tmp_path / "oe", api_base=server.url, iterations=2)
        base = ["run", str(ex), "--no-progress", "--sandbox", "local"]
        refused = _qd(*base, "--db", str(tmp_path / "no.sqlite"), cwd=tmp_path)
        assert refused.returncode == 2 and "backend.api_base" in refused.stderr and not server.requests
        if grant == "store":
            assert _qd("trust", str(ex), cwd=tmp_path).returncode == 0
            extra: list[str] = []
        else:
            extra = ["--trust", "backend"]
        r = _qd(*base, "--db", str(tmp_path / "ok.sqlite"), *extra, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        assert server.requests, "the trusted model was used"
        assert server.headers and all(h.get("Authorization") == f"Bearer {KEY}" for h in server.headers)
        assert "Move the three numbers" in json.dumps(server.requests[0])
        assert (sum(ln.startswith("trusted:") for ln in r.stderr.splitlines()) == 1) == (grant == "store"), r.stderr
