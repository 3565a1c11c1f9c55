"""The ``ray`` executor on a real Ray cluster: placement, resources, lost workers, faults."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from qdevolve import registry
from qdevolve.errors import ConfigError, RunAborted
from qdevolve.evolve.executors import ray_executor  # noqa: F401  (registers "ray" without the entry point)
from qdevolve.evolve.executors.base import EvalJob, WorkerLost
from qdevolve.evolve.executors.ray_executor import parse_memory
from qdevolve.sandbox import SandboxLimits
from qdevolve.types import Program
from tests.scale.conftest import program_code

pytestmark = pytest.mark.ray
WORKER = re.compile(r"^ray:[0-9a-f]{56}:\d+$")


def job(evaluator: Path, value: float, sleep: float = 0.0) -> EvalJob:
    return EvalJob(program=Program(code=program_code(value, sleep), run_id="ray-test"),
                   evaluator=evaluator, limits=SandboxLimits(wall_s=60), sandbox={"type": "local"})


@pytest.fixture(scope="module")
def executor(ray_address: str) -> Iterator[ray_executor.RayExecutor]:
    """Two worker slots that each retry a lost job once."""
    ex = registry.executor.create({"type": "ray", "address": ray_address, "workers": 2,
                                   "max_retries": 1, "placement_timeout_s": 60})
    yield ex
    ex.close()


def _evaluating_pids(timeout_s: float = 30.0, n: int = 1) -> list[int]:
    """Pids of Ray workers busy in ``SandboxWorker.evaluate`` (Ray titles the process so)."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = []
        for p in psutil.process_iter(["pid", "cmdline"]):
            cmd = p.info["cmdline"] or []
            if cmd and cmd[0].startswith("ray::SandboxWorker.evaluate"):
                pids.append(p.info["pid"])
        if len(pids) >= n:
            return pids
        time.sleep(0.05)
    raise AssertionError("no Ray worker started the evaluation in time")


def test_evaluations_run_on_ray_workers_with_real_sandboxes(executor, evaluator_file: Path) -> None:
    futures = [executor.submit(job(evaluator_file, v, sleep=0.3)) for v in range(6)]
    outcomes = [f.result(timeout=120) for f in futures]
    assert [o.result.status for o in outcomes] == ["ok"] * 6
    assert [o.result.score for o in outcomes] == [float(v) for v in range(6)]
    assert all(WORKER.match(o.worker) and o.attempts == 1 for o in outcomes)
    assert len({o.worker for o in outcomes}) == 2  # both slots took work
    assert {o.worker for o in outcomes} <= set(executor.workers())
    assert all(int(o.worker.rsplit(":", 1)[1]) != os.getpid() for o in outcomes)  # not in the controller


def test_sigkilled_worker_mid_evaluation_is_retried_once_with_one_outcome(executor, evaluator_file: Path) -> None:
    fut = executor.submit(job(evaluator_file, 7.0, sleep=2.0))
    victim = _evaluating_pids()[0]
    os.kill(victim, signal.SIGKILL)
    outcome = fut.result(timeout=120)
    assert outcome.result.status == "ok" and outcome.result.score == 7.0
    assert outcome.attempts == 2
    assert not outcome.worker.endswith(f":{victim}")
    assert fut.done() and not fut.cancelled()


def test_retries_spent_raise_worker_lost(executor, evaluator_file: Path) -> None:
    fut = executor.submit(job(evaluator_file, 8.0, sleep=3.0))
    first = _evaluating_pids()[0]
    os.kill(first, signal.SIGKILL)
    second = next(p for p in _evaluating_pids_excluding(first))
    os.kill(second, signal.SIGKILL)
    with pytest.raises(WorkerLost, match="died 2 times"):
        fut.result(timeout=120)
    # the executor keeps serving: lost actors were replaced
    assert executor.submit(job(evaluator_file, 9.0)).result(timeout=120).result.score == 9.0


def _evaluating_pids_excluding(pid: int) -> Iterator[int]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for p in _evaluating_pids(timeout_s=60):
            if p != pid:
                yield p
                return
        time.sleep(0.05)


def test_custom_resources_pin_evaluations_to_matching_nodes(ray_address: str, evaluator_file: Path) -> None:
    """Only the side node (``ray start --resources '{"side": 2}'``) offers ``side``."""
    import ray

    ex = registry.executor.create({"type": "ray", "address": ray_address, "resources": {"side": 1},
                                   "num_cpus": 0.5})
    try:
        side = {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("side")}
        assert ex.slots == 2
        outcomes = [f.result(timeout=120) for f in [ex.submit(job(evaluator_file, v)) for v in range(3)]]
        assert {o.worker.split(":")[1] for o in outcomes} <= side
    finally:
        ex.close()


def test_a_cluster_without_room_is_refused_with_one_line(ray_address: str) -> None:
    with pytest.raises(RunAborted, match="no node of the cluster .* needing .*gpu_that_is_not_there=1"):
        registry.executor.create({"type": "ray", "address": ray_address,
                                  "resources": {"gpu_that_is_not_there": 1}})


def test_an_unreachable_cluster_is_refused_fast() -> None:
    """A fresh controller process (this one may already be connected to the test cluster)."""
    pytest.importorskip("ray")
    code = ("from qdevolve.evolve.executors.ray_executor import RayExecutor\n"
            "RayExecutor(address='127.0.0.1:9', connect_timeout_s=2)\n")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "RunAborted: ray executor: cannot reach the Ray cluster at 127.0.0.1:9" in proc.stderr
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize(("value", "expected"), [("2GiB", 2 * 2**30), ("512MB", 512 * 10**6),
                                                 (1024, 1024), ("1.5g", 1_500_000_000), (None, None)])
def test_memory_sizes(value, expected) -> None:
    assert parse_memory(value) == expected


@pytest.mark.parametrize("value", ["lots", "-1G", "2XB", 0, True])
def test_bad_memory_sizes_name_the_field(value) -> None:
    with pytest.raises(ConfigError, match="executor_options.memory"):
        parse_memory(value)


PLUGIN = '''\
from qdevolve import registry
from qdevolve.types import EvalResult


@registry.sandbox("shipped_to_ray")
class Shipped:
    name = "shipped_to_ray"

    def evaluate(self, program, evaluator=None, limits=None, *, cascade_thresholds=None):
        return EvalResult(score=float(len(program.code)), metrics={"from_plugin": 1.0})

    def close(self):
        pass
'''


def test_plugin_files_travel_to_the_workers(executor, evaluator_file: Path, tmp_path: Path) -> None:
    plugin = tmp_path / "shipped_plugin.py"
    plugin.write_text(PLUGIN)
    program = Program(code="x = 12345\n", run_id="ray-test")
    out = executor.submit(EvalJob(program, evaluator_file, SandboxLimits(wall_s=30),
                                  {"type": "shipped_to_ray"}, (plugin,))).result(timeout=120)
    assert out.result.ok and out.result.score == len(program.code)
    assert out.result.metrics == {"from_plugin": 1.0}


def test_a_sandbox_that_cannot_be_built_on_the_worker_is_a_setup_error(executor, evaluator_file: Path) -> None:
    from qdevolve.errors import EvaluationSetupError

    fut = executor.submit(EvalJob(Program(code="x = 1\n", run_id="ray-test"), evaluator_file,
                                  SandboxLimits(wall_s=30), {"type": "no_such_sandbox_anywhere"}))
    with pytest.raises(EvaluationSetupError, match=r"ray:[0-9a-f]+:\d+: cannot evaluate program .*no_such_sandbox_anywhere"):
        fut.result(timeout=120)
