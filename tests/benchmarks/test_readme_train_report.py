"""The README's training table and held-out sentence follow the raw numbers: comparison words
flip when the numbers flip, and the benchmark runs the README's own commands."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _renderer():
    return _load("readme_train_report", ROOT / "benchmarks" / "reports" / "readme_train.py")


def _metrics(p1, p4, p256, eff, d):
    return {"metrics": {"pass@1": p1, "pass@4": p4, "pass@256": p256, "effective_outcomes": eff, "D_256": d}}


def _raw(train: dict, test: dict, cached: bool | None = False) -> dict:
    def split(prompts, arms):
        return {"prompts": prompts, "n": 256, "seed": 0, "ks": [1, 4, 256],
                "arms": {a: _metrics(*v) for a, v in arms.items()}}
    return {"meta": {"bases_cached": cached},
            "settings": {"task": "few_answer", "arms": ["ips", "grpo"], "seed": 0, "base_seed": 0,
                         "eval": {"train": {"n": 256, "seed": 0}, "test": {"n": 256, "seed": 0}}},
            "splits": {"train": split(16, train), "test": split(8, test)}}


TRAIN = {"base": (0.755, 0.996, 1.0, 4.29, 5.38), "ips": (0.834, 0.996, 1.0, 3.47, 4.69),
         "grpo": (0.971, 1.0, 1.0, 1.04, 1.63)}
TEST = {"base": (0.760, 0.99, 1.0, 3.0, 4.0), "ips": (0.462, 0.9, 1.0, 2.27, 3.0),
        "grpo": (0.328, 0.8, 0.833, 2.13, 2.5)}


def test_table_rows_follow_the_raw_numbers():
    out = _renderer().render(_raw(TRAIN, TEST))
    lines = out["table"].split("\n")
    assert lines[0] == ("| 16 trained prompts | pass@1 | pass@4 | pass@256 | effective answers | "
                        "distinct correct answers (of 256 samples) |")
    assert lines[2:] == ["| base (v0) | 0.755 | 0.996 | 1.000 | 4.29 | 5.38 |",
                         "| ips | 0.834 | 0.996 | 1.000 | 3.47 | 4.69 |",
                         "| grpo | 0.971 | 1.000 | 1.000 | 1.04 | 1.63 |"]


def test_heldout_sentence_as_measured_and_flipped():
    r = _renderer()
    s = r.render(_raw(TRAIN, TEST))["heldout"]
    assert s == ("On the 8 held-out prompts (`--split test`), both fall below the base's pass@1 (0.760): IPS reaches "
                 "0.462, GRPO 0.328. IPS keeps pass@256 at 1.000 where GRPO lowers it to 0.833. Effective answers "
                 "per prompt: IPS 2.27, GRPO 2.13 (the base: 3.00).")
    up = dict(TEST, ips=(0.800, 0.9, 1.0, 2.27, 3.0), grpo=(0.900, 0.8, 1.0, 2.13, 2.5))
    s = r.render(_raw(TRAIN, up))["heldout"]
    assert "both rise above the base's pass@1 (0.760): IPS reaches 0.800, GRPO 0.900" in s
    assert "Both keep pass@256 at the base's 1.000" in s and "fall below" not in s
    mixed = dict(TEST, ips=(0.800, 0.9, 0.9, 2.27, 3.0), grpo=(0.7604, 0.8, 0.8, 2.13, 2.5))
    s = r.render(_raw(TRAIN, mixed))["heldout"]
    assert "IPS rises above the base's pass@1 (0.760) while GRPO matches it" in s  # 0.7604 prints as 0.760
    assert "Both lower pass@256 from the base's 1.000: IPS to 0.900, GRPO to 0.800" in s
    swapped = dict(TEST, ips=(0.5, 0.9, 0.833, 2.27, 3.0), grpo=(0.5, 0.8, 1.0, 2.13, 2.5))
    assert "IPS lowers pass@256 to 0.833 where GRPO keeps it at 1.000" in r.render(_raw(TRAIN, swapped))["heldout"]


def test_summary_follows_the_raw_numbers():
    r = _renderer()
    s = r.render(_raw(TRAIN, TEST))["summary"]
    assert s == ("GRPO raises pass@1 from the base's 0.755 to 0.971 and collapses onto one answer per prompt (1.04 "
                 "effective answers against the base's 4.29); IPS raises pass@1 less, to 0.834, and keeps most of the "
                 "base's answers (3.47 effective answers)")
    worse = dict(TRAIN, ips=(0.70, 0.99, 1.0, 4.5, 5.0), grpo=(0.60, 0.99, 1.0, 1.9, 2.0))
    s = r.render(_raw(worse, TEST))["summary"]
    assert s.startswith("IPS lowers pass@1 from the base's 0.755 to 0.700 and spreads over more answers than the base")
    assert "GRPO lowers pass@1 more, to 0.600, and narrows the base's answers (1.90 effective answers)" in s
    same = dict(TRAIN, ips=(0.7551, 0.99, 1.0, 4.29, 5.0))
    assert "IPS keeps pass@1 at the base's 0.755 and keeps the base's spread of answers" in \
        r.render(_raw(same, TEST))["summary"]


def test_setup_says_whether_the_base_was_cached():
    r = _renderer()
    assert "pre-trained afresh" in r.render(_raw(TRAIN, TEST, cached=False))["setup"]
    assert "read from the tiny-policy cache" in r.render(_raw(TRAIN, TEST, cached=True))["setup"]


def test_the_benchmark_runs_the_readme_commands():
    """Each command the benchmark runs is one of the README's bash lines, verbatim, in the training section."""
    bench = _load("bench_readme_train", ROOT / "benchmarks" / "bench_readme_train.py")
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Train the mutation policy", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    lines = [" ".join(ln.split("  #")[0].split()) for ln in re.sub(r"\\\n\s*", " ", block).splitlines()]
    assert [c for c in lines if c.startswith(("qdevolve train", "qdevolve eval-policy"))] == list(bench.COMMANDS)
