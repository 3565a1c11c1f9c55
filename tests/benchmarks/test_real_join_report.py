"""The single-problem joined benchmark's renderer follows the raw children, never a canned verdict."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _renderer():
    spec = importlib.util.spec_from_file_location("real_join_report", ROOT / "benchmarks" / "reports" / "real_join.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _child(score, parent=0.5, group="g", cluster="c"):
    return {"score": score, "ok": score is not None, "parsed": score is not None, "copy": False,
            "parent_score": parent, "reward": score or 0.0, "cluster": cluster, "group": group,
            "version": 0, "tokens": 10}


def _run(arm, seed, scores, clusters=None):
    clusters = clusters or [f"k{i}" for i in range(len(scores))]
    return {"arm": arm, "seed": seed, "seed_score": 0.5, "best_score": max([0.5] + [s for s in scores if s]),
            "children": [_child(s, group=f"g{i // 2}", cluster=c) for i, (s, c) in enumerate(zip(scores, clusters, strict=True))],
            "steps": [], "stop_reason": "budget", "wall_s": 10.0}


def _raw(trained_scores):
    frozen = [0.6, None, 0.7, None, 0.55, 0.6, None, 0.65]
    runs = []
    for seed in (0, 1, 2):
        runs.append(_run("frozen", seed, frozen))
        runs.append(_run("grpo", seed, trained_scores, ["a"] * len(trained_scores)))
        runs.append(_run("ips", seed, trained_scores))
    return {"settings": {"calls": 8, "group": 2, "every": 4, "lr": 1e-4, "beta": 0.1, "max_tokens": 64,
                         "reward": "score"}, "runs": runs}


def test_top10_curve_and_calls_to_reach_follow_the_children():
    r = _renderer()
    run = _run("frozen", 0, [0.6, None, 0.7])
    assert r.top10_curve(run) == [0.55, 0.55, 0.6]  # the seed program counts
    assert r.calls_to_reach([0.5, 0.6, 0.7, 0.7], 0.7) == 0.75
    assert r.calls_to_reach([0.5, 0.6], 0.7) == float("inf")


def test_a_fast_arm_holds_and_a_slow_one_does_not():
    r = _renderer()
    fast = r.render(_raw([0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]))  # past frozen's final top-10 at call 1
    assert "0.33x" in fast["claims"] and "| holds |" in fast["claims"].split("\n")[2]
    slow = r.render(_raw([None, None, None, None, None, None, None, 0.9]))  # reached only at the last call
    line = slow["claims"].split("\n")[2]
    assert "2.67x" in line and "does not hold" in line  # 8 calls against frozen's 3
    assert "0.7x target does not hold" in slow["summary"] and "0.7x target holds" in fast["summary"]


def test_ips_keeps_more_strategies_than_grpo_when_its_clusters_differ():
    r = _renderer()
    out = r.render(_raw([0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]))
    line = next(x for x in out["claims"].split("\n") if x.startswith("| IPS keeps"))
    assert "+7.0" in line and line.endswith("| holds |")  # 8 clusters against 1 on every seed


def test_the_command_time_is_judged_against_45_minutes_from_the_raw_stamps():
    mod = _renderer()
    raw = _raw([0.9] * 8)
    raw["meta"] = {"started": "2026-12-07T15:00:00Z", "date": "2026-12-07T15:29:06Z", "jobs": 2,
                   "machine": {"cpu_count": 2}}
    text = mod.render(raw)["time"]
    assert "9 runs, 2 at a time, in 29.1 min wall on 2 cores" in text and "holds" in text
    raw["meta"]["date"] = "2026-12-07T15:46:00Z"
    assert "does not hold" in mod.render(raw)["time"]
    raw["meta"]["parts"] = [{"command": "a"}, {"command": "b"}]
    assert "several commands" in mod.render(raw)["time"]
    assert "no start and end time" in mod.command_time({"runs": [], "meta": {}})

