"""bench_llm_loop counts OpenEvolve's children from its evaluator calls (one logged line per
call, from any process), not from what its database keeps; the seed's call is excluded."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_llm_loop as bench  # noqa: E402


def test_every_evaluator_call_is_counted_and_the_seed_excluded(tmp_path: Path) -> None:
    inner = tmp_path / "evaluator.py"
    inner.write_text("def evaluate(path):\n    if 'bad' in path:\n        raise ValueError(path)\n"
                     "    return {'combined_score': 1.0}\n")
    log = tmp_path / "calls.jsonl"
    wrapper = tmp_path / "counting.py"
    wrapper.write_text(bench.COUNTING_EVALUATOR.format(inner=str(inner), log=str(log)))
    spec = importlib.util.spec_from_file_location("counting_eval", wrapper)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.evaluate("seed.py") == {"combined_score": 1.0}
    module.evaluate("child1.py")
    with pytest.raises(ValueError):
        module.evaluate("bad_child.py")
    module.evaluate("child2.py")
    assert bench.count_evaluator_calls(log) == (3, 2)  # 3 children evaluated, 2 returned; the seed not counted
    assert bench.count_evaluator_calls(tmp_path / "missing.jsonl") == (0, 0)
