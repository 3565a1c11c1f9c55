"""Two trainer steps due at once (several prompts in flight) train on disjoint groups.

``JoinedListener.train_step`` collects the complete groups under the backend's lock and moves
``last_seq`` on before releasing it; collecting them before the lock let the second step train
again on the first one's groups with stale log-probabilities (found by
``benchmarks/bench_policy_samples.py``: 1.49 group uses per distinct group)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from qdevolve.evolve.training import JoinedListener
from qdevolve.evolve.training.joined_backend import SharedLock


class _Groups:
    """The collector's contract: the groups after ``last_seq`` and the seq they reach."""

    def __init__(self, n: int) -> None:
        self.seqs = list(range(1, n + 1))
        self.last_seq = 0

    def complete(self) -> tuple[list[int], int]:
        new = [s for s in self.seqs if s > self.last_seq]
        return new, max(new, default=self.last_seq)

    def state(self, last: int) -> dict[str, Any]:
        return {"last_seq": last, "done": []}

    def advance(self, last: int) -> None:
        self.last_seq = max(self.last_seq, last)

    def diversity(self, groups: list[int]) -> dict[str, float]:
        return {}


class _Trainer:
    model = object()

    def __init__(self) -> None:
        self.trained: list[list[int]] = []

    def step(self, groups: list[int]) -> dict[str, float]:
        time.sleep(0.05)  # the other step is due meanwhile
        self.trained.append(list(groups))
        return {"loss": 0.0}

    def save_version(self, metrics: dict[str, Any], extra_state: dict[str, Any]) -> int:
        return len(self.trained)


def _listener() -> JoinedListener:
    lst = JoinedListener.__new__(JoinedListener)
    lst.groups = _Groups(6)
    lst.trainer = _Trainer()
    lock = SharedLock()
    lst.backend = SimpleNamespace(exclusive=lock.exclusive, inner=SimpleNamespace(model=lst.trainer.model))
    lst.settings = SimpleNamespace(solved_by=None)
    lst.train_log, lst.solved, lst.evals_since_step = [], set(), 0
    return lst


def test_concurrent_steps_never_train_a_group_twice() -> None:
    lst = _listener()

    async def both() -> list[Any]:
        return await asyncio.gather(lst.train_step(), lst.train_step())

    results = asyncio.run(both())
    trained = [g for step in lst.trainer.trained for g in step]
    assert sorted(trained) == [1, 2, 3, 4, 5, 6], lst.trainer.trained
    assert results.count(None) == 1, "the second step finds nothing new and takes no step"
    assert lst.groups.last_seq == 6
