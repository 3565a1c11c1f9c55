"""A Ray cluster that goes away mid-run: every waiting evaluation fails with ``WorkerLost``
(the engine's clean, resumable stop) instead of hanging the controller."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.scale.conftest import program_code

pytestmark = pytest.mark.ray

CONTROLLER = """
import sys
from pathlib import Path
from qdevolve.evolve.executors.ray_executor import RayExecutor
from qdevolve.evolve.executors.base import EvalJob, WorkerLost
from qdevolve.sandbox import SandboxLimits
from qdevolve.types import Program

ex = RayExecutor(address=sys.argv[1], workers=1, placement_timeout_s=20)
jobs = [EvalJob(Program(code=sys.argv[3], run_id="gone"), Path(sys.argv[2]), SandboxLimits(wall_s=120),
                {"type": "local"}) for _ in range(2)]
futures = [ex.submit(j) for j in jobs]
print("submitted", flush=True)
for f in futures:
    try:
        f.result(timeout=120)
        print("RESULT", flush=True)
    except WorkerLost as exc:
        print("LOST", exc, flush=True)
after = ex.submit(jobs[0])
print("AFTER", type(after.exception(timeout=5)).__name__, flush=True)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kill_cluster(temp_dir: str) -> int:
    """SIGKILL every process of the private cluster (their command lines name its temp dir)."""
    import psutil

    n = 0
    for p in psutil.process_iter(["pid", "cmdline"]):
        if any(temp_dir in part for part in (p.info["cmdline"] or [])):
            try:
                os.kill(p.info["pid"], signal.SIGKILL)
                n += 1
            except OSError:
                pass
    return n


def test_cluster_that_goes_away_fails_every_job_with_worker_lost(ray_address: str, evaluator_file: Path) -> None:
    ray_bin = Path(sys.executable).with_name("ray")
    temp_dir = tempfile.mkdtemp(prefix="qdr", dir="/tmp")
    port = _free_port()
    start = subprocess.run([str(ray_bin), "start", "--head", f"--port={port}", "--num-cpus=1",
                            f"--temp-dir={temp_dir}", "--include-dashboard=false",
                            "--object-store-memory=80000000", "--disable-usage-stats"],
                           capture_output=True, text=True, timeout=120)
    assert start.returncode == 0, start.stderr[-2000:]
    try:
        ctl = subprocess.Popen([sys.executable, "-c", CONTROLLER, f"127.0.0.1:{port}", str(evaluator_file),
                                program_code(1.0, sleep=60.0)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        assert ctl.stdout.readline().strip() == "submitted"
        time.sleep(3)  # the first job is evaluating, the second waits for the only slot
        assert _kill_cluster(temp_dir) >= 2
        out, err = ctl.communicate(timeout=120)
    finally:
        _kill_cluster(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
    lines = out.splitlines()
    assert ctl.returncode == 0, err[-3000:]
    assert len(lines) == 3, out
    assert all(line.startswith("LOST ray executor: the Ray cluster at") and "went away" in line
               for line in lines[:2]), out
    assert lines[2] == "AFTER WorkerLost"
