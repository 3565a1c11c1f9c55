"""Fixtures of the viewer tests: a database from a real short run, a real server process, Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import synth
from .chromium import Chromium, Page, find_chromium

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def run_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database written by a real run: function_minimization, 8 children, offline AST mutator."""
    path = tmp_path_factory.mktemp("serve-run") / "run.sqlite"
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "run", str(ROOT / "examples" / "function_minimization"),
                           "--iterations", "8", "--mutation", "ast", "--workers", "2", "--seed", "1",
                           "--no-progress", "--db", str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return path


def copy_db(src: Path, dst_dir: Path, name: str = "view.sqlite") -> Path:
    dst = dst_dir / name
    shutil.copyfile(src, dst)
    for suffix in ("-wal", "-shm"):
        if Path(str(src) + suffix).exists():
            shutil.copyfile(str(src) + suffix, str(dst) + suffix)
    return dst


def run_id_of(path: Path) -> str:
    eng = synth.engine(path)
    with eng.connect() as con:
        rid = con.exec_driver_sql("SELECT id FROM runs ORDER BY created_at DESC LIMIT 1").scalar_one()
    eng.dispose()
    return rid


@pytest.fixture(scope="session")
def view_db(run_db: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The real run plus synthetic rows: a hostile program and three policy versions with rollouts."""
    path = copy_db(run_db, tmp_path_factory.mktemp("serve-view"))
    rid = run_id_of(path)
    eng = synth.engine(path)
    hostile = synth.hostile_program(eng, rid)
    for v, (loss, kl) in enumerate([(0.9, 0.0), (0.7, 0.02), (0.5, 0.05)]):
        synth.add_policy(eng, rid, v, {"loss": loss, "kl": kl, "entropy": 2.0 - v / 2, "D_n": float(v + 1)})
        for k in range(4):
            synth.add_program(eng, rid, code=f"x = {v}{k}\n", parents=[hostile] if k == 0 else [], generation=2,
                              operator="policy", policy_version=v, score=k / 4, rollout=("p", f"x = {v}{k}"),
                              reward=1.0 if k < v + 1 else 0.0)
    eng.dispose()
    return {"path": path, "run_id": rid, "hostile": hostile}


class Server:
    """``qdevolve serve`` in a subprocess on a free port."""

    def __init__(self, db: Path | str | None, *extra: str, env: dict[str, str] | None = None) -> None:
        where = ["--db", str(db)] if db is not None else []  # None: from QDEVOLVE_DB in env
        self.proc = subprocess.Popen([sys.executable, "-m", "qdevolve", "serve", *where, "--port", "0",
                                      "--poll", "0.5", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={**os.environ, **(env or {})})
        line = self.proc.stdout.readline()
        m = re.search(r"(http://\S+?)/?$", line.strip())
        if not m:
            self.proc.kill()
            raise AssertionError(f"serve did not start: {line!r} {self.proc.stderr.read()[-2000:]}")
        self.url = m.group(1)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.get("/api")
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.1)

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        req = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def json(self, path: str) -> Any:
        status, _, body = self.get(path)
        assert status == 200, (path, status, body[:300])
        return json.loads(body)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()


@pytest.fixture(scope="session")
def server(view_db: dict[str, Any]) -> Iterator[Server]:
    s = Server(view_db["path"])
    yield s
    s.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Chromium]:
    if find_chromium() is None:
        pytest.skip("chromium is not installed: the browser tests need Debian's chromium "
                    "(.ci/run installs it with 'apt-get install chromium'; or set QDEVOLVE_CHROMIUM)")
    b = Chromium()
    yield b
    b.close()


@pytest.fixture
def page(browser: Chromium) -> Iterator[Page]:
    """A fresh tab of the session's browser, closed after the test."""
    p = browser.new_page()
    yield p
    p.close()
