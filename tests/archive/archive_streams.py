"""Archive test helpers: reproducible streams of evaluated programs, every archive spec."""

from __future__ import annotations

import numpy as np
import pytest

from qdevolve.types import EvalResult, Program

# Every built-in archive, pyribs-style: tests parametrised over these run on each.
ARCHIVE_SPECS: dict[str, dict] = {
    "map_elites": {"type": "map_elites", "bins": 6},
    "map_elites_fixed": {"type": "map_elites", "bins": 5,
                         "ranges": {"code_length": [0, 600], "diversity": [0, 1]}},
    "map_elites_cvt": {"type": "map_elites", "cvt_cells": 16, "cvt_samples": 2000},
    "islands": {"type": "islands", "n_islands": 3, "migration_interval": 4, "migration_fraction": 0.3,
                "inner": {"type": "map_elites", "bins": 4}},
    "islands_dgm": {"type": "islands", "n_islands": 2, "migration_interval": 5, "inner": {"type": "dgm"}},
    "dgm": {"type": "dgm"},
    "novelty": {"type": "novelty", "k": 3, "threshold": 0.08},
    "ribs": {"type": "ribs", "bins": 5, "ranges": [[0, 600], [0, 1]]},
    "pareto": {"type": "pareto", "objectives": {"acc": "max", "size": "min"}, "capacity": 6},
    "pareto_niches": {"type": "pareto", "objectives": {"acc": "max", "size": "min"}, "capacity": 3,
                      "feature_dimensions": ["code_length"], "bins": 3},
    "islands_pareto": {"type": "islands", "n_islands": 2, "migration_interval": 5, "migration_fraction": 0.5,
                       "inner": {"type": "pareto", "objectives": {"acc": "max", "size": "min"}, "capacity": 4}},
    "pareto_lexicographic": {"type": "pareto", "objectives": {"acc": "max", "size": "min"}, "capacity": 4,
                             "order": "lexicographic", "priority": ["size", "acc"]},
}


def archive_params() -> list:
    out = []
    for name in ARCHIVE_SPECS:
        marks = []
        if name == "ribs":
            try:
                import ribs  # noqa: F401
            except ImportError:
                marks.append(pytest.mark.skip(reason="pyribs (extra qd) is not installed"))
        out.append(pytest.param(name, marks=marks, id=name))
    return out


def program_stream(n: int, *, seed: int = 0, n_islands: int = 1, fail_rate: float = 0.15,
                   features: bool = False) -> list[tuple[Program, EvalResult]]:
    """A seed and ``n`` children with varied code, parents, islands and statuses."""
    rng = np.random.default_rng(seed)
    out: list[tuple[Program, EvalResult]] = []
    root = Program(code="def f(x):\n    return x\n", run_id="r")
    root_feats = {"width": 0.5, "depth": 0.5} if features else {}
    out.append((root, EvalResult(status="ok", score=0.5, features=root_feats,
                                 metrics={"acc": 0.5, "size": float(len(root.code))})))
    for i in range(n):
        parent = out[int(rng.integers(len(out)))][0]
        lines = [f"v{j} = {int(rng.integers(100))} * x" for j in range(int(rng.integers(1, 12)))]
        if rng.random() < 0.2:  # some exact duplicates of the parent's code
            code = parent.code
        else:
            code = "def f(x):\n" + "".join(f"    {ln}\n" for ln in lines) + f"    return x + {i}\n"
        prog = Program(code=code, run_id="r", parent_ids=(parent.id,), generation=parent.generation + 1,
                       island=int(rng.integers(n_islands)), operator="test")
        if rng.random() < fail_rate:
            res = EvalResult(status=str(rng.choice(["error", "timeout", "invalid"])), error="boom")
        else:
            feats = {"width": float(rng.random()), "depth": float(rng.random())} if features else {}
            score = float(np.round(rng.random(), 3))
            # the pareto specs' objectives: the score against the code's length (no new draw)
            res = EvalResult(status="ok", score=score, features=feats,
                             metrics={"acc": score, "size": float(len(code))})
        out.append((prog, res))
    return out
