"""A second agent, written only from docs/agents.md's interface section, runs in the loop and scores.

``DOC_AGENT`` uses what the page documents and nothing else: the ``task`` dict (``name``,
``description``), ``feedback["score"]``, ``tools.remaining()``, ``tools.lineage()``,
``tools.generate`` raising ``ToolUnavailable`` offline, ``tools.mutate``, ``tools.evaluate``'s
``{"status", "score"}`` and ``tools.BudgetExhausted``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agents.test_loop import make_example, run_example

pytestmark = pytest.mark.slow

DOC_AGENT = '''
"""Written from docs/agents.md: chain two edits, keep whichever candidate scores best."""

from qdevolve_agent import BudgetExhausted, ToolUnavailable


def _ask_model(task, parent, tools):
    try:
        return tools.generate("Improve this program for: " + task["description"] + "\\n" + parent)
    except ToolUnavailable:  # offline: no model
        return None


def propose(task, parent, feedback, tools):
    best, best_score = parent, feedback.get("score")
    _ask_model(task, parent, tools)
    seen = len(tools.lineage())
    while tools.remaining().get("calls", 0) >= 2:
        try:
            child = tools.mutate(tools.mutate(best))
        except BudgetExhausted:
            break
        except Exception:
            continue
        try:
            result = tools.evaluate(child)
        except BudgetExhausted:
            return child if best is parent else best
        if result["status"] == "ok" and (best_score is None or result["score"] > best_score):
            best, best_score = child, result["score"]
    if best is parent:
        best = parent + "\\n_SEEN = " + str(seen) + "\\n" if task["name"] == "self" else parent
    return best
'''


def test_an_agent_written_from_the_docs_runs_in_the_loop_and_scores(tmp_path: Path) -> None:
    ex = make_example(tmp_path, iterations=2, seed_agent=DOC_AGENT, calls_per_task=2)
    summary, _run_id, rows = run_example(ex, tmp_path / "run.sqlite")
    seed = [r for p, r in rows if p.operator == "seed"][0]
    assert seed is not None and seed.ok and seed.score is not None
    assert json.loads(seed.artifacts["best_scores"])["bowl"] > 0 and "heldout/line_fit" in seed.metrics
    seed_id = [p.id for p, _ in rows if p.operator == "seed"][0]
    own = [(p, r) for p, r in rows if p.operator == "self" and p.parent_ids == (seed_id,)]
    assert own, "the doc agent made no child agent of itself"
    # its own self-modifications ran (a mutated descendant may fail its own: that is the search)
    assert all(p.metadata["agent_call"]["status"] == "ok" and r is not None and r.ok for p, r in own)
    assert summary.best_score is not None
