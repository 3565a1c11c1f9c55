"""Generation overlaps evaluation: a bred job gives its model slot back while it evaluates.

Real scripted HTTP server, real ``openai`` backend, real ``local`` sandbox; the evaluator
sleeps so that an evaluation is much longer than a model reply.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.core.loop import eval_backlog
from qdevolve.evolve.setup.example import load_example
from qdevolve.testing.scripted_server import ScriptedServer
from qdevolve.testing.scripts import ScriptedModel
from tests.evolve.conftest import EVALUATOR, write_example

SLOW_EVALUATOR = "import time\n" + EVALUATOR.replace("    v = float(mod.value())",
                                                     "    time.sleep(1.2)\n    v = float(mod.value())")


class _Clock:
    """Server latency 0.3 s per reply; records when each request arrived."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, _req: dict) -> float:
        with self._lock:
            self.arrivals.append(time.monotonic())
        return 0.3


def _evolution(tmp_path: Path, url: str, iterations: int) -> tuple[LineageStore, Evolution]:
    ex = load_example(write_example(tmp_path / "ex", evaluator=SLOW_EVALUATOR))
    cfg = ex.config.with_overrides(
        iterations=iterations, workers=1, max_pending=2, seed=3, mutation=[{"type": "diff", "weight": 1.0}],
        backend={"type": "openai", "api_base": url, "model": "scripted", "concurrency": 2})
    store = LineageStore(tmp_path / "run.sqlite")
    return store, Evolution.start(ex, cfg, store, progress=False)


@pytest.mark.slow
def test_requests_start_while_children_evaluate(tmp_path: Path) -> None:
    clock = _Clock()
    with ScriptedServer(ScriptedModel(seed=0), latency_s=clock) as server:
        store, evo = _evolution(tmp_path, server.url, 5)
        assert eval_backlog(evo) == 2  # 2 x one worker slot
        evo.run()
        evo.close()
    arrivals = clock.arrivals
    # Requests 1 and 2 start together; their replies come at ~0.3 s and their children then
    # wait for the one worker (1.2 s each). Requests 3 and 4 must not wait for those
    # evaluations: with a job holding its model slot until evaluated they would start >= 1.5 s.
    assert len(arrivals) >= 4
    assert arrivals[2] - arrivals[0] < 1.0, [round(a - arrivals[0], 2) for a in arrivals]
    assert arrivals[3] - arrivals[0] < 1.0, [round(a - arrivals[0], 2) for a in arrivals]
    assert server.max_in_flight <= 2, "never more model requests than max_pending"
    assert evo.ledger.stored == 5, "the budget is exact"
    n = store.execute("SELECT COUNT(*) FROM programs WHERE operator != 'seed'")[0][0]
    assert n == 5


@pytest.mark.slow
def test_backpressure_when_evaluation_is_the_bottleneck(tmp_path: Path) -> None:
    """A full backlog stops new requests: at most max_pending + backlog jobs exist at once."""
    clock = _Clock()
    with ScriptedServer(ScriptedModel(seed=1), latency_s=clock) as server:
        store, evo = _evolution(tmp_path, server.url, 6)
        t0 = time.monotonic()
        evo.run()
        evo.close()
    # The first child is told at ~0.3 + 1.2 s; before that only max_pending + backlog = 4
    # requests may have started (2 breeding slots + 2 bred children waiting for the worker).
    first_told = t0 + 1.45
    assert sum(a < first_told for a in clock.arrivals) <= 4, [round(a - t0, 2) for a in clock.arrivals]
    assert evo.ledger.stored == 6


def test_the_backlog_holds_a_full_burst_of_replies() -> None:
    """Replies that arrive together may all wait for a worker: the backlog is at least max_pending."""
    from types import SimpleNamespace

    def engine(slots: int, max_pending: int | None, listener: object = None) -> SimpleNamespace:
        return SimpleNamespace(backend=object(), listener=listener, executor=SimpleNamespace(slots=slots),
                               config=SimpleNamespace(max_pending=max_pending))

    assert eval_backlog(engine(2, 8)) == 8  # 8 replies at once, 2 workers: all 8 may wait
    assert eval_backlog(engine(2, 16), 8) == 8  # the loop's own max_pending wins over the config's
    assert eval_backlog(engine(4, 2)) == 8  # 2 x slots when that is larger
    assert eval_backlog(engine(2, 1)) == 0  # one plan in flight in all
    assert eval_backlog(engine(2, 8, listener=object())) == 0  # training: rollouts stay on-policy
