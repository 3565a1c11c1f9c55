"""The README's documented commands work: each `qdevolve` line of its bash blocks and its
Python API example run here (with small budgets and a scripted model server)."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from qdevolve.testing.scripted_server import ScriptedServer
from qdevolve.testing.scripts import ScriptedModel

from .conftest import METRICS_EVALUATOR, OPENEVOLVE_CONFIG, SEED, write

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# Substitutions that make a documented command cheap and concrete (placeholder -> value).
SMALL = [("--iterations 300", "--iterations 4"), ("--iterations 600", "--iterations 6"),
         ("--steps 50", "--steps 2"), ("--k 1,4,16,64,256", "--k 1,4"), ("--train-every 16", "--train-every 2"),
         ("graphml|json|dot", "graphml"), ("--format graphml --out lineage.graphml", "--format graphml --out OUT")]
TRAINING = ("qdevolve train", "qdevolve eval-policy", "--policy tiny", "examples/expr_evolution")


def readme_commands() -> list[str]:
    """Every `qdevolve ...` command in the README's bash blocks (comments and `;` split off)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        block = re.sub(r"\\\n\s*", " ", block)  # shell line continuations
        for line in block.splitlines():
            for part in line.split("  #")[0].split(";"):
                part = part.strip()
                if part.startswith("qdevolve "):
                    out.append(part)
    return out


def _concrete(cmd: str, subs: dict[str, str]) -> list[str]:
    for a, b in SMALL:
        cmd = cmd.replace(a, b)
    cmd = re.sub(r"\[([^\]]*)\]", r"\1", cmd)  # optional parts: use them
    for a, b in subs.items():
        cmd = cmd.replace(a, b)
    args = cmd.split()[1:]
    return [sys.executable, "-m", "qdevolve", *args]


def test_readme_lists_the_commands_we_run() -> None:
    cmds = readme_commands()
    assert len(cmds) >= 12
    assert any(c.startswith("qdevolve run path/to/openevolve_example") for c in cmds)


@pytest.mark.slow
@pytest.mark.ray  # it runs the README's --executor ray commands on the CI cluster when one is exported
def test_readme_commands_run(tmp_path: Path) -> None:
    oe = write(tmp_path / "openevolve_example", {
        "initial_program.py": SEED, "evaluator.py": METRICS_EVALUATOR.replace("    if c > 1.0:", "    if False:"),
        "config.yaml": OPENEVOLVE_CONFIG.format(iterations=3, dims='["spread", "balance"]')})
    db = tmp_path / "archives" / "circle_packing-1.sqlite"
    subs = {"archives/circle_packing-*.sqlite": str(db), "archives/train.sqlite": str(tmp_path / "train.sqlite"),
            "path/to/openevolve_example": str(oe), "OUT": str(tmp_path / "lineage.graphml"),
            "archive.png": str(tmp_path / "archive.png"), "MODEL": "scripted"}
    with ScriptedServer(ScriptedModel(seed=0)) as server:
        subs["http://127.0.0.1:8000/v1"] = server.url
        for cmd in readme_commands():
            if any(t in cmd for t in TRAINING):
                # Training commands have their own end-to-end tests (tests/rl, tests/evolve/test_joined.py);
                # here each documented option must exist.
                words = cmd.split()
                r = subprocess.run([sys.executable, "-m", "qdevolve", words[1], "--help"], capture_output=True,
                                   text=True, timeout=120, cwd=ROOT)
                assert r.returncode == 0, r.stderr
                for opt in (w for w in words if w.startswith("--")):
                    assert opt in r.stdout, (cmd, opt)
                continue
            if cmd.startswith("qdevolve serve"):
                _check_serve(_concrete(cmd, {"archives/RUN.sqlite": str(db)}))
                continue
            if "--executor ray" in cmd:
                ray_address = os.environ.get("QDEVOLVE_TEST_RAY_ADDRESS")
                if not ray_address:  # no cluster here: the documented options must exist
                    r = subprocess.run([sys.executable, "-m", "qdevolve", "run", "--help"], capture_output=True,
                                       text=True, timeout=120, cwd=ROOT)
                    for opt in (w for w in cmd.split() if w.startswith("--")):
                        assert opt in r.stdout, (cmd, opt)
                    continue
                target = os.environ.get("QDEVOLVE_TEST_PG_URL")
                cmd = cmd.replace("HEAD:6379", ray_address)
                cmd = re.sub(r"--db \S+", "", cmd)
                extra = ["--db", str(tmp_path / "ray.sqlite") if not target else target,
                         "--iterations", "4", "--no-progress", "--sandbox", "local"]
                if target:
                    extra += ["--budget-pool", f"readme{os.getpid()}"]
                r = subprocess.run(_concrete(cmd, subs) + extra, capture_output=True, text=True, timeout=300,
                                   cwd=ROOT)
                assert r.returncode == 0, (cmd, r.stderr[-2000:])
                continue
            if cmd.startswith("qdevolve run examples/circle_packing --iterations"):
                extra = ["--db", str(db), "--no-progress", "--sandbox", "local"]
            elif cmd.startswith("qdevolve run "):
                extra = ["--db", str(tmp_path / f"r{abs(hash(cmd))}.sqlite"), "--no-progress", "--sandbox", "local"]
                if "--model" in cmd:  # a real model on CPU: one child proves the documented line runs
                    extra += ["--iterations", "1"]
                elif "--backend" in cmd or "--policy" in cmd:
                    extra += ["--iterations", "4"]
            elif cmd.startswith("qdevolve resume"):
                extra = ["--no-progress"]
            else:
                extra = []
            if "DB" in cmd.split() or "PROGRAM_ID" in cmd:
                subs["DB"] = str(db)
                con = sqlite3.connect(db)
                subs["PROGRAM_ID"] = con.execute("SELECT id FROM programs WHERE operator != 'seed' LIMIT 1").fetchone()[0]
                con.close()
            argv = _concrete(cmd, subs) + extra
            # a real model samples a few tokens per second on 2 loaded cores
            r = subprocess.run(argv, capture_output=True, text=True, timeout=900 if "--model" in cmd else 300,
                               cwd=ROOT)
            assert r.returncode == 0, (cmd, argv, r.stderr[-2000:])


def _check_serve(argv: list[str]) -> None:
    """Start the documented ``serve`` command on a free port, load its first page, stop it."""
    import urllib.request

    proc = subprocess.Popen([*argv, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=ROOT)
    try:
        url = None
        for _ in range(200):
            line = proc.stdout.readline()
            m = re.search(r"http://127\.0\.0\.1:\d+/?", line)
            if m:
                url = m.group(0)
                break
            if not line and proc.poll() is not None:
                break
        assert url, "qdevolve serve printed no URL"
        import time

        for attempt in range(60):  # the URL is printed just before the server listens
            try:
                with urllib.request.urlopen(url, timeout=60) as resp:
                    assert resp.status == 200
                break
            except OSError:
                if attempt == 59:
                    raise
                time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_readme_python_api_example(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    code = re.search(r"## Python API\n\n```python\n(.*?)```", text, re.S).group(1)
    code = code.replace('{"run": {"iterations": 20}', '{"run": {"iterations": 5, "workers": 1}, '
                        '"sandbox": {"type": "local"}')
    (tmp_path / "api_example.py").write_text(code, encoding="utf-8")
    r = subprocess.run([sys.executable, "api_example.py"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "budget" in r.stdout and "X = " in r.stdout
    assert (tmp_path / "archives" / "api-demo.sqlite").exists()
