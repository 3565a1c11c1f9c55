"""Benchmark runs spread over worker processes: ``python SCRIPT --worker JSON`` per share of plans.

Each worker process runs its plans one after another (so torch is imported once per process)
and prints one JSON line per finished plan; :func:`run_in_workers` hands each line to a
callback as it arrives and fails with the worker's stderr if a worker exits non-zero.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

__all__ = ["run_in_workers"]


def run_in_workers(script: Path, plans: list[dict[str, Any]], jobs: int, on_result: Callable[[dict[str, Any]], None],
                   env: dict[str, str] | None = None) -> None:
    """Run ``plans`` round-robin over ``jobs`` processes of ``script --worker``; ``on_result`` per JSON line.

    Args:
        script: The benchmark script; it must accept ``--worker JSON`` (a list of plans).
        plans: The plans, JSON-serialisable.
        jobs: Worker processes (at most one per plan).
        on_result: Called with each result line (a dict) as it arrives, from a reader thread.
        env: Extra environment variables for the workers (one thread each for BLAS is always set).
    """
    shares = [plans[i::jobs] for i in range(max(1, jobs)) if plans[i::jobs]]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **(env or {})}
    logs = [tempfile.TemporaryFile(mode="w+") for _ in shares]  # a pipe nobody reads would block the worker
    procs = [subprocess.Popen([sys.executable, str(script), "--worker", json.dumps(share)],
                              stdout=subprocess.PIPE, stderr=log, text=True, env=full_env)
             for share, log in zip(shares, logs, strict=True)]

    def collect(proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                on_result(json.loads(line))

    with ThreadPoolExecutor(max_workers=max(1, len(procs))) as pool:
        list(pool.map(collect, procs))
    for proc, log in zip(procs, logs, strict=True):
        code = proc.wait()
        log.seek(0)
        err = log.read()
        log.close()
        if code != 0:
            raise SystemExit(f"a benchmark worker of {Path(script).name} failed:\n{err[-3000:]}")
