"""A joined run with LoRA (the tiny policy of ``examples/expr_evolution``, real subprocesses):
every stored version is an adapter of the cached tiny base, and ``resume`` keeps training the
same adapter, saving adapter versions over the same base."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("peft")

from qdevolve.backends.adapters import base_identity, read_meta  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "expr_evolution"


def _qd(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "qdevolve", *args, "--no-progress"], capture_output=True, text=True,
                          timeout=1200, cwd=cwd)


@pytest.mark.slow
def test_a_joined_lora_run_stores_adapter_versions_and_resumes_them(tmp_path: Path) -> None:
    example = tmp_path / "expr"
    example.mkdir()
    for f in ("initial_program.py", "evaluator.py"):
        (example / f).write_text((EXAMPLE / f).read_text())
    cfg = (EXAMPLE / "config.yaml").read_text()
    old = "  trainer: {learning_rate: 0.0003, beta: 0.1}\n"
    assert old in cfg, "the example's config no longer has the line this test replaces"
    (example / "config.yaml").write_text(cfg.replace(old, "  trainer: {learning_rate: 0.0003, beta: 0.1, use_lora: true, "
                                                          "lora_r: 2}\n"))
    db = tmp_path / "lora.sqlite"
    r = _qd("run", str(example), "--db", str(db), "--iterations", "32", "--train-every", "16", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    r = _qd("resume", "--db", str(db), "--iterations", "48", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    con = sqlite3.connect(db)
    rows = con.execute("SELECT version, path FROM policy_versions ORDER BY version").fetchall()
    assert len(rows) >= 3, rows
    metas = [read_meta(p) for _, p in rows]
    assert all(m.kind == "adapter" for m in metas)
    assert len({m.base for m in metas}) == 1  # one base, named by content: the cached tiny policy
    base = metas[0].base
    assert base_identity(base.path) == base and not Path(base.path).is_relative_to(tmp_path)
    assert all(not (Path(p) / "model.safetensors").exists() for _, p in rows)
    assert [(Path(p) / "trainer_state.pt").is_file() for _, p in rows][-1]
    resumed = con.execute("SELECT MAX(policy_version) FROM programs WHERE operator = 'policy'").fetchone()[0]
    assert resumed is not None and resumed >= 1
