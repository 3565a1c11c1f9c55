"""The commands of docs/openevolve.md and docs/shinka.md run as written (on qdevolve's own
small copies of the example layouts, with the scripted model server where a model is named)."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from qdevolve.testing.scripted_server import ScriptedServer
from qdevolve.testing.scripts import ScriptedModel

from .conftest import METRICS_EVALUATOR, OPENEVOLVE_CONFIG, SEED, write
from .test_shinka_layout import SHINKA_EVALUATE, SHINKA_YAML

DOCS = Path(__file__).resolve().parents[2] / "docs"


def doc_commands(name: str) -> list[str]:
    """The `qdevolve ...` lines of a doc's bash blocks."""
    text = (DOCS / name).read_text(encoding="utf-8")
    return [ln.strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S)
            for ln in block.splitlines() if ln.strip().startswith("qdevolve ")]


def _run(cmd: str, subs: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    for a, b in subs.items():
        cmd = cmd.replace(a, b)
    r = subprocess.run([sys.executable, "-m", "qdevolve", *cmd.split()[1:], "--no-progress"], cwd=cwd,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{cmd}\n{r.stderr[-2000:]}"
    return r


def _finished_dbs(root: Path) -> list[Path]:
    out = []
    for db in sorted(root.rglob("*.sqlite")):
        con = sqlite3.connect(db)
        try:
            if con.execute("SELECT status FROM runs").fetchone()[0] == "finished":
                out.append(db)
        finally:
            con.close()
    return out


@pytest.mark.slow
def test_openevolve_doc_commands(tmp_path: Path) -> None:
    cmds = [c for c in doc_commands("openevolve.md") if "--config" in c]
    assert len(cmds) == 2
    dims = '["spread", "complexity"]'
    ex = write(tmp_path / "circle_packing", {
        "initial_program.py": SEED, "evaluator.py": METRICS_EVALUATOR.replace('del metrics["balance"]', "pass"),
        "config_phase_1.yaml": OPENEVOLVE_CONFIG.format(iterations=3, dims=dims),
        "config_phase_2.yaml": OPENEVOLVE_CONFIG.format(iterations=4, dims=dims)})
    (tmp_path / "archives").mkdir()
    for cmd in cmds:
        _run(cmd, {"path/to/circle_packing": str(ex)}, tmp_path)
    dbs = _finished_dbs(tmp_path)
    assert len(dbs) == 2 and any(db.name == "phase2.sqlite" for db in dbs)


@pytest.mark.slow
def test_openevolve_trust_doc_commands(tmp_path: Path) -> None:
    """The one step of docs/openevolve.md on an OpenEvolve-style example whose config names its
    server and key: offline with a warning, then `qdevolve trust`, then with its model."""
    import os

    from .conftest import OPENEVOLVE_LLM_CONFIG

    cmds = [c for c in doc_commands("openevolve.md") if "function_minimization" in c]
    assert [c.split()[1] for c in cmds] == ["run", "trust", "run"], cmds
    with ScriptedServer(ScriptedModel(seed=0)) as server:
        ex = write(tmp_path / "function_minimization", {
            "initial_program.py": SEED, "evaluator.py": METRICS_EVALUATOR,
            "config.yaml": OPENEVOLVE_LLM_CONFIG.format(iterations=2, api_base=server.url, key_env="QD_DOC_API_KEY",
                                                        model="scripted")})
        subs = {"path/to/function_minimization": str(ex)}
        offline = _run(cmds[0] + " --sandbox local", subs, tmp_path)
        assert "no effect" in offline.stderr and not server.requests, offline.stderr
        trust = subprocess.run([sys.executable, "-m", "qdevolve", *cmds[1].replace(*subs.popitem()).split()[1:]],
                               cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert trust.returncode == 0 and "QD_DOC_API_KEY" in trust.stdout, trust.stdout + trust.stderr
        os.environ["QD_DOC_API_KEY"] = "sk-doc"
        try:
            model = _run(cmds[2] + " --sandbox local", {"path/to/function_minimization": str(ex)}, tmp_path)
        finally:
            del os.environ["QD_DOC_API_KEY"]
        assert server.requests and sum(ln.startswith("trusted:") for ln in model.stderr.splitlines()) == 1
    assert len(_finished_dbs(tmp_path)) == 2


@pytest.mark.slow
def test_shinka_doc_commands(tmp_path: Path) -> None:
    cmds = doc_commands("shinka.md")
    assert len(cmds) == 2
    ex = write(tmp_path / "shinka_example", {
        "initial.py": SEED, "evaluate.py": SHINKA_EVALUATE, "scoring.py": "TARGET = 3.0\n",
        "shinka_small.yaml": SHINKA_YAML.replace("num_generations: 10", "num_generations: 3")})
    with ScriptedServer(ScriptedModel(seed=0)) as server:
        for cmd in cmds:
            r = _run(cmd + " --iterations 3" if "--config" not in cmd else cmd,
                     {"path/to/shinka_example": str(ex), "MODEL": "scripted", "URL": server.url}, tmp_path)
            assert "finished" in r.stdout or "budget" in r.stdout, r.stdout
    assert len(_finished_dbs(tmp_path)) == 2
