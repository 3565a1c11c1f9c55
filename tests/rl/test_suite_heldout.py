"""The suite's held-out targets are never read by a training path.

An audit hook (``sys.addaudithook``) sees every ``open`` of the process, whatever the API
(``open``, ``Path.read_text``, ``io.open``, ``os.open``); inside :func:`heldout_forbidden` it
raises on the held-out file, so any training path that read it would fail here.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from qdevolve.rl.tasks.suite_heldout import HELDOUT_FILE, load_heldout

_GUARD = {"on": False}
_FORBIDDEN = os.path.realpath(HELDOUT_FILE)


def _hook(event: str, args: tuple) -> None:
    if _GUARD["on"] and event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0]) if not isinstance(args[0], str) else args[0]
        if os.path.realpath(path) == _FORBIDDEN:
            raise PermissionError(f"a training path opened the held-out targets: {path}")


sys.addaudithook(_hook)


@contextlib.contextmanager
def heldout_forbidden():
    _GUARD["on"] = True
    try:
        yield
    finally:
        _GUARD["on"] = False


def test_guard_catches_a_read_of_the_heldout_file():
    with heldout_forbidden(), pytest.raises(PermissionError):
        load_heldout()
    with heldout_forbidden(), pytest.raises(PermissionError):
        Path(HELDOUT_FILE).read_bytes()
    assert load_heldout()  # readable again outside the guard


def test_pretraining_data_and_prompts_never_read_heldout():
    from qdevolve.rl.tasks import get_task

    with heldout_forbidden():
        task = get_task("suite_edit")
        pairs = task.sft_examples(np.random.default_rng(0), 64)
        prompts = task.prompts("train") + task.prompts("test")
    assert len(pairs) == 64 and all("|" in p for p, _ in pairs)
    held = {t.prompt("x") for t in load_heldout()}
    assert not held & set(prompts)


def _tiny_model(tok):
    from qdevolve.rl.tiny import build_model

    return build_model(tok, n_embd=16, n_layer=1, n_head=2, n_positions=64, seed=0)


@pytest.mark.slow
@pytest.mark.parametrize("objective", [{"type": "grpo"}, {"type": "vpo", "m": 1}, {"type": "ips"},
                                       {"type": "es", "population": 2, "sigma": 0.01, "alpha": 0.01}])
def test_suite_loop_training_never_reads_heldout(objective):
    from qdevolve.rl.tasks import get_task
    from qdevolve.rl.tasks.suite import load_targets
    from qdevolve.rl.tasks.suite_loop import LoopConfig, SuiteLoop
    from qdevolve.rl.tiny import build_tokenizer

    with heldout_forbidden():
        tok = build_tokenizer(get_task("suite_edit").alphabet)
        model = _tiny_model(tok)
        cfg = LoopConfig(objective=objective, samples=64, group=4, groups_per_step=4, checkpoints=(32, 64))
        out = SuiteLoop(load_targets()[:4], model, tok, cfg).run()
    assert out["samples"] == 64 and len(out["versions"]) >= 2


@pytest.mark.slow
def test_base_pretraining_never_reads_heldout(tmp_path):
    from qdevolve.rl.tiny import tiny_policy_dir

    with heldout_forbidden():
        path = tiny_policy_dir("suite_edit", tmp_path, seed=0, sft_steps=2, n_embd=16, n_layer=1, n_head=2,
                               batch_size=8)
    assert (path / "qdevolve_tiny.json").is_file()


def test_example_evaluator_never_reads_heldout():
    import importlib.util

    ex = Path(__file__).resolve().parents[2] / "examples" / "suite"
    spec = importlib.util.spec_from_file_location("suite_example_evaluator", ex / "evaluator.py")
    mod = importlib.util.module_from_spec(spec)
    with heldout_forbidden():
        spec.loader.exec_module(mod)
        seeds = sorted(ex.glob("initial_program*.py"))
        results = [mod.evaluate(str(p)) for p in seeds]
    assert len(seeds) == len(results) >= 32
    assert all(0.0 <= r["combined_score"] < 1.0 for r in results)
