"""The suite's held-out targets: read by evaluation code only, never by a training path.

``suite_heldout.json`` (beside this module) holds targets no policy is trained on: the
benchmark reads them after training to compare the trained policy with the frozen one.
Nothing in :mod:`qdevolve.rl.tasks.suite`, :mod:`qdevolve.rl.tasks.suite_loop` or the
pre-training task imports this module; ``tests/rl/test_suite_heldout.py`` runs every training
path with this file made unreadable and fails if any of them opens it.
"""

from __future__ import annotations

import json
from pathlib import Path

from qdevolve.rl.tasks.suite import SuiteTarget, targets_from_json

__all__ = ["HELDOUT_FILE", "load_heldout"]

HELDOUT_FILE = Path(__file__).with_name("suite_heldout.json")


def load_heldout(path: str | Path | None = None) -> list[SuiteTarget]:
    """The held-out targets (evaluation only)."""
    p = Path(path) if path is not None else HELDOUT_FILE
    return targets_from_json(json.loads(p.read_text()), str(p))
