"""Counters of a run that decide its next choices, stored with every ``tell`` and restored on resume.

The database is the checkpoint: each ``tell`` writes, in the same transaction as the child,
the random state (``rng``), the LLM ensemble's bandit statistics and draw RNG (``ensemble``,
with the reward of the child being told already credited), the token/cost totals
(``usage``) and these counters (``counters``):

* ``next_iteration`` - plans made so far, duplicates and novelty rejections included. The
  islands archive takes island ``iteration % n_islands`` and the operators see the
  iteration in their context, so a resumed run must go on counting from here, not from
  the number of stored children;
* ``novelty_rejected`` - children the embedding novelty filter rejected (its embeddings
  are rebuilt from the stored programs, which are exactly the admitted ones).

With one plan in flight (``max_pending: 1``) and a fixed seed, a run killed at any moment
and resumed makes the same next choices (parents, operator, model, inspirations, island)
as one that was never interrupted.
"""

from __future__ import annotations

from typing import Any

__all__ = ["counters_state", "restore_counters"]


def counters_state(engine: Any) -> dict[str, int]:
    """The engine's counters as JSON (stored under ``counters``)."""
    out = {"next_iteration": int(engine._next_iteration)}
    if engine.novelty is not None:
        out["novelty_rejected"] = int(engine.novelty.rejected)
    return out


def restore_counters(engine: Any, state: dict[str, Any] | None) -> None:
    """Set the counters from a stored ``counters`` state (``None``: a run stored before them)."""
    if not isinstance(state, dict):
        engine._next_iteration = engine.ledger.reserved
        engine._iteration_offset = 0
        return
    nxt = state.get("next_iteration")
    if isinstance(nxt, int) and not isinstance(nxt, bool) and nxt >= engine.ledger.reserved:
        engine._next_iteration = nxt
        # the loop counts plans from ledger.reserved (the stored children); ask() adds the offset
        engine._iteration_offset = nxt - engine.ledger.reserved
    rejected = state.get("novelty_rejected")
    if engine.novelty is not None and isinstance(rejected, int) and not isinstance(rejected, bool):
        engine.novelty.rejected = max(0, rejected)
