"""The policy page's rows: per policy version of a run, training and outcome figures, and the
pass@k and effective answers ``qdevolve eval-policy`` stored with the versions."""

from __future__ import annotations

import math
from typing import Any

from qdevolve.serve import queries as Q
from qdevolve.serve.db import ReadOnlyDB

__all__ = ["policy_view", "policy_evals"]

_ALIASES = {"loss": ("loss", "train/loss"), "kl": ("kl", "kl_div", "train/kl"),
            "entropy": ("entropy", "train/entropy"), "D_n": ("D_n", "d_n", "Dn", "distinct_n"),
            "pass@1": ("pass@1", "pass_at_1", "pass1")}


def _metric(metrics: dict[str, Any], name: str) -> float | None:
    for key in _ALIASES[name]:
        v = metrics.get(key) if isinstance(metrics, dict) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def policy_evals(versions: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``eval-policy`` results stored with the versions (``metrics["evals"]``), by setting.

    Returns ``{"key": the setting scored on most versions (ties: the last stored), "ks": its
    k values, "rows": [{"version", "pass@k"..., "effective_outcomes", "D_n"}]}``, or an empty
    ``rows`` list when no version was scored. Only finite numbers pass; anything else a
    database holds is dropped.
    """
    by_key: dict[str, dict[int, dict[str, float]]] = {}
    for pv in versions:
        m = pv["metrics"] if isinstance(pv["metrics"], dict) else {}
        evals = m.get("evals") if isinstance(m.get("evals"), dict) else {}
        for key, entry in evals.items():
            metrics = entry.get("metrics") if isinstance(entry, dict) else None
            if isinstance(key, str) and isinstance(metrics, dict):
                by_key.setdefault(key, {})[int(pv["version"])] = {
                    k: float(v) for k, v in metrics.items() if isinstance(k, str) and _finite(v)}
    if not by_key:
        return {"key": None, "ks": [], "rows": []}
    key = max(by_key, key=lambda k: (len(by_key[k]), list(by_key).index(k)))
    ks = sorted({int(k.split("@", 1)[1]) for r in by_key[key].values() for k in r
                 if k.startswith("pass@") and k.split("@", 1)[1].isdigit()})
    rows = []
    for version, metrics in sorted(by_key[key].items()):
        d_n = next((v for k, v in metrics.items() if k.startswith("D_") and k[2:].isdigit()), None)
        rows.append({"version": version, **{f"pass@{k}": metrics.get(f"pass@{k}") for k in ks},
                     "effective_outcomes": metrics.get("effective_outcomes"), "D_n": d_n})
    return {"key": key, "ks": ks, "rows": rows}


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
            "evals": policy_evals(versions), "joined": bool(rows) or bool(produced)}
