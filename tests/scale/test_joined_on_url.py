"""A joined run (tiny policy trained while it evolves) on a PostgreSQL database: its policy
weights need a place on disk, which a database URL does not give (``train.checkpoint_dir``,
else ``archives/<run name>.policies`` or ``~/.cache/qdevolve``)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

pytest.importorskip("torch", reason="the joined loop needs the 'rl' extra (torch, transformers)")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "expr_evolution"


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "qdevolve", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900, env={**os.environ, **(env or {})})


def _versions(url: str, name: str) -> list[tuple[int, str]]:
    eng = create_engine(url)
    with eng.connect() as c:
        rows = c.execute(text("SELECT v.version, v.path FROM policy_versions v JOIN runs r ON r.id = v.run_id "
                              "WHERE r.name = :n ORDER BY v.version"), {"n": name}).all()
    eng.dispose()
    return [(int(v), p) for v, p in rows]


@pytest.mark.slow
@pytest.mark.postgres
def test_joined_run_on_postgres_saves_weights_under_checkpoint_dir(pg_url: str, tmp_path: Path) -> None:
    name = f"joined-pg-{uuid.uuid4().hex[:8]}"
    example = tmp_path / "expr"
    example.mkdir()
    for f in ("initial_program.py", "evaluator.py"):
        (example / f).write_text((EXAMPLE / f).read_text())
    ckpt = tmp_path / "ckpt"
    cfg = (EXAMPLE / "config.yaml").read_text().replace("  every: 32\n", f"  every: 16\n  checkpoint_dir: {ckpt}\n")
    assert "checkpoint_dir" in cfg, "the example's config no longer has the line this test replaces"
    (example / "config.yaml").write_text(cfg)
    r = _run(["run", str(example), "--db", pg_url, "--iterations", "32", "--name", name, "--no-progress",
              "--trust", "train.checkpoint_dir"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    versions = _versions(pg_url, name)
    assert len(versions) >= 2, versions  # the base version and at least one trained one
    for v, path in versions:
        assert Path(path).is_relative_to(ckpt) and Path(path).name == f"v{v}", path
        assert (Path(path) / "trainer_state.pt").is_file()
    eng = create_engine(pg_url)
    with eng.connect() as c:
        rid = c.execute(text("SELECT id FROM runs WHERE name = :n"), {"n": name}).scalar()
    eng.dispose()
    resumed = _run(["resume", "--db", pg_url, "--run", rid, "--iterations", "48", "--no-progress",
                    "--trust", "train.checkpoint_dir"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(_versions(pg_url, name)) > len(versions)  # loaded the weights back, trained on


@pytest.mark.slow
@pytest.mark.postgres
def test_joined_run_on_postgres_without_checkpoint_dir_uses_archives(pg_url: str, tmp_path: Path) -> None:
    name = f"joined-pg-{uuid.uuid4().hex[:8]}"
    (tmp_path / "archives").mkdir()
    r = _run(["run", str(EXAMPLE), "--db", pg_url, "--iterations", "16", "--train-every", "16", "--name", name,
              "--no-progress"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    versions = _versions(pg_url, name)
    assert len(versions) >= 2, versions
    root = tmp_path / "archives" / f"{name}.policies"
    assert all(Path(p).is_relative_to(root) and Path(p, "config.json").is_file() for _, p in versions), versions
