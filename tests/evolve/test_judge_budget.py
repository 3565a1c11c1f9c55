"""An LLM judge spends through the run's budget, even with a client of its own: its tokens are
on the run's meter under ``judge``, stop the run at ``--max-tokens`` and are kept in the run state."""

from __future__ import annotations

from pathlib import Path

import pytest

from qdevolve.cluster.llm_judge import LLMJudgeCluster
from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.budget import parse_budget
from qdevolve.evolve.setup.example import load_example
from qdevolve.evolve.training import Reward, score_reward
from qdevolve.testing.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
CIRCLES = ROOT / "examples" / "circle_packing"


class JudgingListener:
    """A training listener whose judge names every child's strategy (as the RL loop's does),
    through a judge client it built itself from a backend spec."""

    backend = None
    group_size = None
    max_pending = None

    def __init__(self, url: str) -> None:
        self.clusterer = LLMJudgeCluster(backend={"type": "openai", "api_base": url, "model": "judge"})
        self.keys: list[str] = []

    def reward(self, program, result, events, parent) -> Reward:
        return score_reward(program, result, events, parent)

    async def after_job(self, programs) -> None:
        for p in programs:
            self.keys.append(await self.clusterer.acall((p.code, {})))

    def close(self) -> None:
        return None


@pytest.mark.slow
def test_a_judge_with_its_own_client_spends_the_runs_budget(tmp_path: Path) -> None:
    ex = load_example(CIRCLES)
    cfg = ex.config.with_overrides(iterations=40, workers=1, max_pending=1, sandbox={"type": "local"},
                                   mutation=[{"type": "ast", "weight": 1.0}], fail_fast_children=0,
                                   budget=parse_budget({"max_tokens": 300}))
    store = LineageStore(tmp_path / "j.sqlite", create=True)
    with ScriptedServer(lambda req: "greedy packing") as judge:
        listener = JudgingListener(judge.url)
        evo = Evolution.start(ex, cfg, store, progress=False, listener=listener)
        try:
            summary = evo.run()
        finally:
            evo.close()
        asked = len(judge.requests)
        assert asked >= 1 and listener.keys and listener.keys[0] == "judge:greedy packing"
        assert summary.stop_reason.startswith("token budget reached"), summary.stop_reason
        # resume keeps the judge's account: the restored meter is still past the budget
        again = Evolution.resume(store, summary.run_id, progress=False, listener=JudgingListener(judge.url),
                                 example_dir=str(CIRCLES))
        try:
            assert again.budget.spenders["judge"].calls == asked
            resumed = again.run()
        finally:
            again.close()
        assert len(judge.requests) == asked
    assert resumed.stop_reason.startswith("token budget reached"), resumed.stop_reason
    assert resumed.evaluations == summary.evaluations, "nothing more was spent or evaluated"
    usage = store.get_state(summary.run_id, "usage")
    store.close()
    assert set(usage["spenders"]) == {"judge"}, usage
    assert usage["spenders"]["judge"]["calls"] == asked == usage["models"]["judge"]["calls"]
    assert usage["tokens"] >= 300
    assert summary.evaluations < 1 + 40, "the judge's tokens stopped the run"
    assert "judge" in summary.stats["usage"]["spenders"]
