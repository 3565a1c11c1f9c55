"""``benchmarks/bench_suite.py``: the suite through the real joined run, read back from its
lineage databases, and the claims' verdict rule of ``benchmarks/reports/suite_engine.py``."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


def _raw(values: dict[str, list[float]], held: dict[str, list[float]] | None = None,
         cps: dict[str, list[float]] | None = None) -> dict:
    """A raw file of finished runs: per arm, final targets solved per seed (curves of two points)."""
    runs = []
    for arm, vals in values.items():
        for seed, v in enumerate(vals):
            c = (cps or {}).get(arm, [1.0] * len(vals))[seed]
            h = (held or {}).get(arm, [0.0] * len(vals))[seed]
            runs.append({"arm": arm, "seed": seed, "error": None, "samples": 30, "evaluations": 25, "copies": 5,
                         "trainer_steps": 1, "step_seconds": [0.1], "run_wall_s": 1.0,
                         "curves": {"samples": [10.0, 20.0, 30.0], "solved": [0.0, v / 2, v],
                                    "classes_per_solved": [0.0, c, c]},
                         "heldout": {"solved": h, "pass@1": 0.0, "pass@8": 0.0}})
    return {"meta": {"command": "x", "date": "d", "commit": "0" * 40, "dirty": False, "seeds": [0, 1, 2, 3, 4],
                     "loadavg": [1.0, 1.0, 1.0], "machine": {"cpu_count": 2, "torch": "t"}},
            "settings": {"targets": ["t00"], "samples": 30, "samples_per_target": 30, "examples": 2,
                         "checkpoints": [10, 20, 30]},
            "arms": list(values), "runs": runs}


def _claim(raw: dict, cid: str) -> dict:
    from reports.suite_engine import claims

    return next(c for c in claims(raw) if c["id"] == cid)


def test_claim_holds_only_when_the_interval_excludes_the_null():
    clear = _raw({"frozen": [4, 5, 4, 5, 4], "grpo": [8, 9, 8, 9, 9]})
    c = _claim(clear, "1")
    assert c["a"] == "grpo" and c["low"] > 1.3 and c["verdict"] == "holds"
    # a mean ratio above 1.3, two seeds far off: the interval reaches below 1.3
    noisy = _raw({"frozen": [4, 5, 4, 5, 4], "grpo": [16, 1, 1, 1, 16]})
    c = _claim(noisy, "1")
    assert c["point"] > 1.3 and c["low"] < 1.3 and c["verdict"] == "holds in the mean"
    assert _claim(_raw({"frozen": [5, 5, 5], "grpo": [5, 6, 5]}), "1")["verdict"] == "does not hold"


def test_diversity_claims_compare_with_grpo_of_the_same_changes():
    raw = _raw({"frozen": [3, 3, 3, 3], "grpo+all": [4, 4, 5, 4], "ips+all": [6, 7, 6, 7], "grpo": [9, 9, 9, 9]},
               held={"frozen": [1, 1, 1, 1], "grpo": [2, 3, 2, 3]},
               cps={"grpo+all": [1, 1, 1, 1], "ips+all": [2, 2, 2, 2]})
    from reports.suite_engine import claims

    got = {c["id"]: c for c in claims(raw)}
    assert got["2a"]["b"] == "grpo+all" and got["2a"]["verdict"] == "holds"
    assert got["3"]["point"] == pytest.approx(2.0) and got["3"]["verdict"] == "holds"
    assert got["4"]["a"] == "grpo" and got["4"]["verdict"] == "holds"  # the best trained arm's held-out targets


def test_a_ratio_over_a_flat_reference_stays_infinite():
    """GRPO flat (slope 0) and IPS rising: the ratio is inf, never the largest float in the table."""
    from reports.suite_engine import interval, render

    point, low, high, n = interval({0: 1.0, 1: 2.0}, {0: 0.0, 1: 0.0}, "ratio")
    assert point == float("inf") and high == float("inf") and n == 2
    raw = _raw({"frozen": [3, 3], "grpo+all": [4, 4], "ipsc+all": [5, 5]})
    assert "e+307" not in render(raw)["claims"] and "179769" not in render(raw)["claims"]


def test_render_is_a_pure_function_of_the_raw_file():
    from reports.suite_engine import render

    raw = _raw({"frozen": [3, 4, 3], "grpo+all": [4, 4, 5]})
    a, b = render(raw), render(json.loads(json.dumps(raw)))
    assert a == b and set(a) == {"run", "solved", "final", "changes", "claims", "groups", "summary"}
    assert "grpo+all" in a["summary"] and "target does not hold" in a["summary"]  # x1.30 at best, not above
    big = render(_raw({"frozen": [2, 2, 2], "grpo+all": [5, 5, 6]}))["summary"]
    assert "more than frozen" in big and "target holds" in big  # the verdict follows the numbers
    assert "| grpo+all | grpo+all" not in a["changes"] and "| grpo+all | frozen |" in a["changes"]


def test_arm_names_are_checked():
    from suite_engine import parse_arm, run_config

    assert parse_arm("ips+all") == ("ips", ("kl_lr", "improve", "anycopy"))
    with pytest.raises(ValueError, match="unknown change"):
        parse_arm("grpo+klr")
    with pytest.raises(ValueError, match="frozen base trains nothing"):
        parse_arm("frozen+improve")
    cfg = run_config("grpo+improve+anycopy", policy="p", samples=40, every=16, group=4)["train"]
    assert cfg["reward"] == "improvement_clipped" and cfg["shaping"]["same_class"] == -0.3
    assert cfg["trainer"] == {"learning_rate": 1e-3, "beta": 0.0} and cfg["max_samples"] == 40
    assert run_config("frozen", policy="p", samples=40, every=16, group=4)["train"]["enabled"] is False
    fail = run_config("ipsc+kl_lr+improve+fail", policy="p", samples=40, every=16, group=4)["train"]
    assert fail["shaping"] == {"lazy": -0.3, "duplicate": -0.3, "error": -0.4, "no_program": -0.4}  # no same_class
    assert fail["objective"] == {"type": "ips", "reward": "raw", "key": "cluster"}


def test_group_stats_count_rewarded_children_and_repeated_classes_per_group():
    from types import SimpleNamespace as R

    from suite_engine import group_stats

    ro = [R(id="a", group_id="g1", reward=1.0, cluster_key="x"), R(id="b", group_id="g1", reward=0.5, cluster_key="x"),
          R(id="c", group_id="g1", reward=0.0, cluster_key="y"), R(id="d", group_id="g2", reward=1.0, cluster_key="x"),
          R(id="e", group_id="g2", reward=1.0, cluster_key="z"), R(id="f", group_id="g3", reward=-0.3, cluster_key="x"),
          R(id="g", group_id="g3", reward=None, cluster_key="x")]  # not evaluated: not counted
    g = group_stats(ro)
    assert g["groups"] == 3 and g["children"] == 6
    assert g["rewarded_share"] == pytest.approx(4 / 6)
    assert g["groups_with_1"] == pytest.approx(2 / 3) and g["groups_with_2"] == pytest.approx(2 / 3)
    assert g["groups_repeated_rewarded_class"] == pytest.approx(1 / 3)  # g1 only: x twice among rewarded


def test_groups_table_renders_mean_and_sd_per_arm_and_says_when_missing():
    from reports.suite_engine import render

    raw = _raw({"frozen": [1, 1], "ipsc+all": [1, 1]})
    assert "not recorded" in render(raw)["groups"]
    for i, r in enumerate(raw["runs"]):
        r["groups"] = {"groups": 10.0, "children": 80.0, "rewarded_share": 0.02 * (1 + i % 2), "groups_with_1": 0.1,
                       "groups_with_2": 0.0, "groups_repeated_rewarded_class": 0.0}
    rows = {line.split(" | ")[0]: line for line in render(raw)["groups"].splitlines()}
    assert rows["| ipsc+all"].startswith("| ipsc+all | 2 | 10 ± 0 | 3.0 % ± 1.4 | 10.0 % ± 0.0 |")


@pytest.mark.slow
def test_engine_bench_runs_qdevolve_and_measures_from_the_lineage_db(tmp_path):
    """Two arms, two targets, 16 samples each: real ``qdevolve run`` (local sandbox), the raw file."""
    import bench_suite

    out = tmp_path / "suite_engine.json"
    bench_suite.main(["--targets", "2", "--samples-per-target", "16", "--seeds", "0", "--arms", "frozen,grpo+all",
                      "--every", "16", "--heldout-n", "4", "--points", "2", "--jobs", "1", "--out", str(out),
                      "--work", str(tmp_path / "work")])
    raw = json.loads(out.read_text())
    assert {"commit", "dirty", "date", "command", "loadavg", "machine", "seeds"} <= set(raw["meta"])
    runs = {r["arm"]: r for r in raw["runs"]}
    assert set(runs) == {"frozen", "grpo+all"} and all(r["error"] is None for r in runs.values())
    assert runs["frozen"]["trainer_steps"] == 0 and runs["grpo+all"]["trainer_steps"] >= 1
    for r in runs.values():
        assert r["samples"] >= 32 and r["curves"]["samples"] == [16.0, 32.0]
        assert len(r["heldout"]["per_target"]) == 8
    # the curves come from the run's own database: count its rollouts again
    with sqlite3.connect(tmp_path / "work" / "grpo_all-0.sqlite") as c:
        assert c.execute("select count(*) from rollouts").fetchone()[0] == runs["grpo+all"]["samples"]
    # --resume keeps the finished runs and runs nothing more
    bench_suite.main(["--targets", "2", "--samples-per-target", "16", "--seeds", "0", "--arms", "frozen,grpo+all",
                      "--every", "16", "--heldout-n", "4", "--points", "2", "--jobs", "1", "--out", str(out),
                      "--resume"])
    assert json.loads(out.read_text())["runs"] == raw["runs"]
    # the group statistics measured in the run equal those read again from the kept databases
    assert all(set(r["groups"]) >= {"rewarded_share", "groups_repeated_rewarded_class"} for r in raw["runs"])
    again = json.loads(out.read_text())
    for r in again["runs"]:
        r.pop("groups")
    out.write_text(json.dumps(again))
    bench_suite.main(["--out", str(out), "--remeasure-groups", str(tmp_path / "work")])
    assert [r["groups"] for r in json.loads(out.read_text())["runs"]] == [r["groups"] for r in raw["runs"]]


def test_a_resumed_file_names_the_commit_of_each_run():
    from reports.suite_engine import render

    raw = _raw({"frozen": [1, 1], "ipsc+all": [1, 1]})
    assert "runs measured on" not in render(raw)["run"]  # one commit (or none recorded): no row
    for r in raw["runs"]:
        r["commit"] = "a" * 40 if r["arm"] == "frozen" else "b" * 40
    row = next(line for line in render(raw)["run"].splitlines() if "runs measured on" in line)
    assert f"`{'a' * 12}`: 2 runs (frozen)" in row and f"`{'b' * 12}`: 2 runs (ipsc+all)" in row
