"""A model reply cannot hold the controller past ``--max-wall-time``: reply parsers are linear,
and parsing runs off the event loop against a deadline."""

from __future__ import annotations

import asyncio
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
