"""The run summary's model rows: the parse rate and tokens/s of a run whose replies come from a
real OpenAI-compatible HTTP server on 127.0.0.1 (a scripted model), through the real backend,
the ``block`` operator, the sandbox and the store."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.report.display import print_summary
from qdevolve.evolve.report.summary_rows import model_rows
from qdevolve.evolve.setup.example import load_example
from qdevolve.testing.scripted_server import ScriptedServer
from qdevolve.types import EvalResult, Program

KNAPSACK = Path(__file__).resolve().parents[2] / "examples" / "small_model_knapsack"
GOOD = "Try value per weight:\n```python\ndef priority(value, weight, room):\n    return value / weight\n```\n"
BAD = "I think dividing would help."


def test_rows_count_replies_that_became_children_and_children_ok() -> None:
    def child(op: str, status: str | None, tokens: int, latency: float) -> tuple[Program, EvalResult | None]:
        meta = {"usage": {"completion_tokens": tokens, "latency_s": latency}}
        if status == "invalid":  # the operator could not read a program from the reply
            meta["failed_mutation"] = True
        return Program(code="x = 1\n", operator=op, metadata=meta), None if status is None else EvalResult(status=status)

    rows = dict(model_rows([(Program(code="seed\n", operator="seed"), EvalResult(status="ok")),
                            child("block", "ok", 50, 1.0), child("block", "invalid", 30, 0.5),
                            child("diff", "error", 20, 0.5), child("diff", None, 0, 0.0)], elapsed_s=4.0))
    assert rows["parse rate"] == "75.0% (3/4 replies parsed into a child; block 1/2, diff 2/2)"
    assert rows["children ok"] == "25.0% (1/4 replies gave a child that evaluated ok; block 1/2, diff 0/2)"
    assert rows["tokens/s"] == "50.0 per request, 25.0 over the run (100 completion tokens)"
    assert model_rows([(Program(code="seed\n", operator="seed"), EvalResult(status="ok"))], 1.0) == []


@pytest.mark.slow
def test_a_model_run_summary_shows_parse_rate_and_tokens_per_second(tmp_path: Path) -> None:
    replies = iter([GOOD, BAD] * 10)

    def script(req: dict[str, Any]) -> str:
        return next(replies)

    ex = load_example(KNAPSACK)
    with ScriptedServer(script, latency_s=0.05) as server:
        cfg = ex.config.with_overrides(iterations=6, workers=1, seed=0, max_pending=1,
                                       backend={"type": "openai", "api_base": server.url, "model": "scripted"},
                                       mutation=[{"type": "block"}])
        evo = Evolution.start(ex, cfg, LineageStore(tmp_path / "k.sqlite"), progress=False)
        summary = evo.run()
        evo.close()
    rows = dict(summary.model_rows)
    # one reply in two parses, and only the first good one is new (the rest are duplicates)
    assert rows["parse rate"] == "16.7% (1/6 replies parsed into a child; block 1/6)", rows
    assert rows["children ok"] == "16.7% (1/6 replies gave a child that evaluated ok; block 1/6)", rows
    assert "block" in rows["parse rate"] and "tokens/s" in rows
    assert summary.best_score > summary.seed_score, "value / weight beats the value-first seed"
    out = io.StringIO()
    print_summary(summary, Console(file=out, width=120))
    assert "parse rate" in out.getvalue() and "tokens/s" in out.getvalue()
