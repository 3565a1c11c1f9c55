"""The policy page's rows: per policy version of a joined run, training and outcome figures."""

from __future__ import annotations

import math
from typing import Any

from qdevolve.serve import queries as Q
from qdevolve.serve.db import ReadOnlyDB

__all__ = ["policy_view"]

_ALIASES = {"loss": ("loss", "train/loss"), "kl": ("kl", "kl_div", "train/kl"),
            "entropy": ("entropy", "train/entropy"), "D_n": ("D_n", "d_n", "Dn", "distinct_n"),
            "pass@1": ("pass@1", "pass_at_1", "pass1")}


def _metric(metrics: dict[str, Any], name: str) -> float | None:
    for key in _ALIASES[name]:
        v = metrics.get(key) if isinstance(metrics, dict) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


def policy_view(db: ReadOnlyDB, run: dict[str, Any]) -> dict[str, Any]:
    """Per policy version: loss, KL, entropy, D_n, pass@1 and the programs it produced.

    pass@1 is the version's recorded ``pass@1`` metric when the trainer wrote one, else the
    fraction of the version's rollouts whose reward reaches the run's ``correct_threshold``
    (``train.correct_threshold``, default 1.0): the unbiased pass@k estimator of Chen et al.
    (2021) at k = 1 is exactly that fraction.
    """
    versions = Q.policy_versions(db, run["id"])
    produced = Q.programs_per_version(db, run["id"])
    train = (run.get("config") or {}).get("train") or {}
    threshold = float(train.get("correct_threshold", 1.0)) if isinstance(train, dict) else 1.0
    rewards: dict[int, list[float]] = {}
    for v, r in Q.rollout_rewards(db, run["id"]):
        if v is not None and r is not None:
            rewards.setdefault(int(v), []).append(float(r))
    rows = []
    for pv in versions:
        m = pv["metrics"] if isinstance(pv["metrics"], dict) else {}
        v = int(pv["version"])
        rs = rewards.get(v, [])
        p1 = _metric(m, "pass@1")
        source = "metric" if p1 is not None else "rollouts"
        if p1 is None and rs:
            p1 = sum(r >= threshold for r in rs) / len(rs)
        prod = produced.get(v, {"programs": 0, "ok": 0, "best_score": None})
        rows.append({"version": v, "parent_version": pv.get("parent_version"), "objective": pv.get("objective"),
                     "step": pv.get("step"), "created_at": pv.get("created_at"),
                     "loss": _metric(m, "loss"), "kl": _metric(m, "kl"), "entropy": _metric(m, "entropy"),
                     "D_n": _metric(m, "D_n"), "pass@1": p1, "pass@1_source": source if p1 is not None else None,
                     "rollouts": len(rs), **prod,
                     "metrics": {k: v2 for k, v2 in m.items() if isinstance(v2, (int, float, str, bool))}})
    return {"run_id": run["id"], "correct_threshold": threshold, "versions": rows,
            "joined": bool(rows) or bool(produced)}
