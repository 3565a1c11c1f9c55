"""A model reply cannot hold the controller past ``--max-wall-time``: reply parsers are linear,
and parsing runs off the event loop against a deadline."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.budget import parse_budget
from qdevolve.evolve.setup.example import load_example
from qdevolve.mutation._llm import ParseTimeout, check_deadline, parse_off_loop
from qdevolve.testing.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
CIRCLES = ROOT / "examples" / "circle_packing"

# 1,000 SEARCH blocks without REPLACE: the old SEARCH/REPLACE expression took minutes on it.
HOSTILE = "<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n" * 1_000


@pytest.mark.slow
def test_a_run_fed_pathological_replies_stops_at_max_wall_time(tmp_path: Path) -> None:
    ex = load_example(CIRCLES)
    cfg = ex.config.with_overrides(iterations=10_000, workers=1, max_pending=2, sandbox={"type": "local"},
                                   fail_fast_children=0, max_duplicate_streak=100_000,
                                   backend={"type": "openai", "api_base": "", "model": "scripted"},
                                   mutation=[{"type": "diff", "weight": 1.0}],
                                   budget=parse_budget({"max_wall_time": 6}))
    with ScriptedServer(lambda req: HOSTILE) as server:
        cfg = cfg.with_overrides(backend={"type": "openai", "api_base": server.url, "model": "scripted"})
        store = LineageStore(tmp_path / "w.sqlite", create=True)
        t = time.monotonic()
        evo = Evolution.start(ex, cfg, store, progress=False)
        try:
            summary = evo.run()
        finally:
            evo.close()
        elapsed = time.monotonic() - t
        asked = len(server.requests)
    assert summary.stop_reason.startswith("wall-time budget"), summary.stop_reason
    assert elapsed < 6 + 30, elapsed  # start-up (seed evaluation) plus the 6 s budget, not minutes
    assert asked >= 3, "the hostile replies were parsed quickly, one after another"
    store.close()


def test_parse_off_loop_keeps_the_loop_running_and_ends_at_the_deadline() -> None:
    ticks: list[float] = []

    def slow_parse() -> str:
        while True:  # a parse that never ends on its own, but checks its deadline
            time.sleep(0.01)
            check_deadline("a test loop")

    async def ticker() -> None:
        for _ in range(20):
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    async def main() -> None:
        t = time.monotonic()
        with pytest.raises(ParseTimeout, match="parse_timeout_s=0.3"):
            await asyncio.gather(parse_off_loop(slow_parse, 0.3), ticker())
        assert time.monotonic() - t < 2.0
        assert len(ticks) >= 10, "the event loop ran while the parse did"

    asyncio.run(main())


def test_parse_off_loop_returns_and_raises_like_the_call() -> None:
    async def main() -> None:
        assert await parse_off_loop(lambda: 41 + 1, 5.0) == 42
        with pytest.raises(ZeroDivisionError):
            await parse_off_loop(lambda: 1 / 0, 5.0)

    asyncio.run(main())


def test_parse_workers_are_reused_between_replies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sequential parses run on one kept worker thread, not a new thread per reply (a fresh pool:
    idle workers left by other tests would share the jobs)."""
    from qdevolve.mutation import _llm

    monkeypatch.setattr(_llm, "_WORKERS", _llm._ParseWorkers())
    workers: set[threading.Thread] = set()  # the objects, kept: an OS thread id can be reused

    async def main() -> None:
        for _ in range(30):
            await parse_off_loop(lambda: workers.add(threading.current_thread()), 5.0)

    asyncio.run(main())
    assert len(workers) == 1, f"{len(workers)} threads for 30 sequential parses"


def test_an_abandoned_parse_keeps_its_worker_and_later_replies_still_parse() -> None:
    """A parse past its deadline that never checks it holds one worker; the next replies are
    served by other workers at once, and each parse sees only its own deadline."""
    release = threading.Event()
    stuck: list[int] = []

    def hostile() -> None:  # never calls check_deadline: only the awaiting side gives up
        stuck.append(threading.get_ident())
        release.wait(30)

    def deadline_left() -> tuple[int, float]:
        from qdevolve.mutation._llm import _DEADLINE

        deadline = _DEADLINE.get()
        assert deadline is not None
        return threading.get_ident(), deadline - time.monotonic()

    async def main() -> None:
        with pytest.raises(ParseTimeout):
            await parse_off_loop(hostile, 0.2)
        t = time.monotonic()
        for _ in range(5):
            ident, left = await parse_off_loop(deadline_left, 4.0)
            assert ident != stuck[0], "a reply was queued behind the abandoned parse"
            assert 3.0 < left <= 4.0, left
        assert time.monotonic() - t < 2.0

    try:
        asyncio.run(main())
    finally:
        release.set()


def test_idle_parse_workers_retire() -> None:
    from qdevolve.mutation._llm import _ParseWorkers

    pool = _ParseWorkers(idle_s=0.1)
    served: list[threading.Thread] = []
    done = threading.Event()
    pool.submit(lambda: (served.append(threading.current_thread()), done.set(), None)[-1])
    assert done.wait(5)
    served[0].join(5)
    assert not served[0].is_alive(), "an idle worker outlived idle_s"
    assert pool._idle == 0
    again = threading.Event()
    pool.submit(lambda: (again.set(), None)[-1])  # no idle worker left: a new one starts
    assert again.wait(5)


def test_a_forked_child_parses_with_workers_of_its_own() -> None:
    """After a fork the child has none of the parent's idle worker threads; a parse there must
    start a worker instead of queueing for one that does not exist."""
    import os

    async def parse_once() -> int:
        return await parse_off_loop(lambda: 7, 3.0)

    assert asyncio.run(parse_once()) == 7  # the parent now has an idle worker
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if its parse ran
        try:
            code = 0 if asyncio.run(parse_once()) == 7 else 1
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
