"""Soak (marker ``slow``): 1,000 evaluations drawn at random from hostile and ordinary
programs across two worker threads, every result stored in a real lineage database.

Acceptance (issue 3): zero controller crashes (evaluate never raises), zero leaked
processes or containers, controller RSS growth under 50 MiB, every evaluation stored with
its status.
"""

from __future__ import annotations

import gc
import os
import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

from qdevolve.db.store import LineageStore
from qdevolve.sandbox import SandboxLimits
from qdevolve.sandbox._proc import sandbox_processes
from qdevolve.sandbox.attacks import ATTACKS, HostCanaries
from qdevolve.types import Program

from .conftest import make_box

pytestmark = pytest.mark.slow

# hostile programs that end quickly; the slow ones (wall clock) are drawn rarely
SLOW = {"cpu_loop", "sleep", "fork_bomb", "ignore_signals", "stdout_flood", "many_files", "proc_sys_poke"}
ORDINARY = [
    "print(sum(range(1000)))",
    "x = [i * i for i in range(10000)]\nprint(len(x))",
    "import json\nprint(json.dumps({'a': 1}))",
    "def f(n):\n    return n if n < 2 else f(n - 1) + f(n - 2)\nprint(f(15))",
    "raise ValueError('ordinary failure')",
]
LIMITS = SandboxLimits(wall_s=1.5, cpu_s=1, memory_mb=256, processes=32, output_bytes=16384,
                       file_size_bytes=1 << 20, open_files=64, tmpfs_mb=16)


def draw(rng: random.Random, host: HostCanaries) -> tuple[str, str]:
    u = rng.random()
    if u < 0.55:
        return "ordinary", rng.choice(ORDINARY)
    fast = [a for a in ATTACKS if a.name not in SLOW]
    slow = [a for a in ATTACKS if a.name in SLOW]
    attack = rng.choice(slow) if u > 0.985 else rng.choice(fast)
    return attack.name, host.render(attack.code)


@pytest.mark.parametrize("backend", ["bwrap", "local", pytest.param("docker", marks=pytest.mark.docker)])
def test_soak_1000_evaluations_two_workers(tmp_path, backend, request):
    n = int(os.environ.get("QDEVOLVE_SOAK_N", "1000"))
    rng = random.Random(1234)
    proc = psutil.Process()
    store = LineageStore(tmp_path / "soak.sqlite")
    run_id = store.create_run(name="soak")
    if backend == "docker":
        box = make_box("docker", image=request.getfixturevalue("docker_image"), warm=True)
    else:
        box = make_box(backend)
    statuses: Counter[str] = Counter()
    with HostCanaries() as host:
        jobs = [draw(rng, host) for _ in range(n)]

        def one(job):
            kind, code = job
            program = Program(code=code, run_id=run_id, operator=kind)
            result = box.evaluate(program, None, LIMITS)  # must never raise
            store.write(programs=[program], evaluations=[(program.id, result, backend)])
            return kind, result

        # warm up allocator / imports before taking the memory baseline
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(one, jobs[:20]))
        gc.collect()
        rss0 = proc.memory_info().rss
        with ThreadPoolExecutor(2) as pool:
            for _kind, result in pool.map(one, jobs[20:]):
                statuses[result.status] += 1
                assert host.env_value not in str(result.to_dict())
                assert host.file_value not in str(result.to_dict())
        gc.collect()
        growth_mb = (proc.memory_info().rss - rss0) / (1 << 20)
        assert not host.received, host.received
        assert host.sums() == host.checksums
    box.close()
    assert growth_mb < 50, f"controller RSS grew {growth_mb:.1f} MiB"
    assert store.count_programs(run_id) == n
    assert store.count_evaluations(run_id) == n
    rows = store.execute("select status, count(*) from evaluations group by status")
    stored = {s: c for s, c in rows}
    assert sum(stored.values()) == n and set(stored) <= {"ok", "error", "timeout", "memory", "killed", "invalid"}
    assert stored.get("ok", 0) > n * 0.3 and stored.get("invalid", 0) > 0 and stored.get("memory", 0) > 0
    if backend == "docker":
        import docker

        client = docker.from_env()
        assert not client.containers.list(all=True, filters={"label": f"qdevolve.owner={os.getpid()}"})
        client.close()
    else:
        assert sandbox_processes(box.uids.used) == []
    assert not box.staging.root.exists()
    store.close()
    print(f"soak {backend}: {dict(statuses)}; RSS growth {growth_mb:.1f} MiB")
