"""The tiny base policy: a normal Hugging Face directory, cached, loadable with Auto* classes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from qdevolve.rl.tiny import build_tokenizer, load_tiny_policy, tiny_policy_dir


def test_char_tokenizer_round_trip(tmp_path: Path) -> None:
    tok = build_tokenizer("0123456789x+-*()")
    ids = tok("x*x+1")["input_ids"]
    assert ids[0] == tok.bos_token_id and len(ids) == 6  # one token per character
    assert tok.decode(ids, skip_special_tokens=True) == "x*x+1"
    tok.save_pretrained(tmp_path)
    back = AutoTokenizer.from_pretrained(tmp_path)
    assert back("x*x+1")["input_ids"] == ids
    assert (back.eos_token_id, back.pad_token_id) == (tok.eos_token_id, tok.pad_token_id)


def test_build_cache_and_load(tmp_path: Path) -> None:
    path = tiny_policy_dir("multi_answer", tmp_path, sft_steps=5, batch_size=16)
    info = json.loads((path / "qdevolve_tiny.json").read_text())
    assert info["task"] == "multi_answer" and info["sft_steps"] == 5 and np.isfinite(info["sft_loss"])
    assert (path / "config.json").is_file() and (path / "tokenizer.json").is_file()
    stamp = (path / "qdevolve_tiny.json").stat().st_mtime_ns
    assert tiny_policy_dir("multi_answer", tmp_path, sft_steps=5, batch_size=16) == path
    assert (path / "qdevolve_tiny.json").stat().st_mtime_ns == stamp  # reused, not rebuilt
    assert tiny_policy_dir("multi_answer", tmp_path, sft_steps=5, batch_size=16, seed=1) != path
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    assert model.config.model_type == "gpt2" and model.config.n_layer == 2
    out = model.generate(**tok("m=7 r=3:", return_tensors="pt"), max_new_tokens=4, do_sample=False,
                         pad_token_id=tok.pad_token_id)
    assert out.shape[1] <= len(tok("m=7 r=3:")["input_ids"]) + 4
    m2, t2 = load_tiny_policy("multi_answer", tmp_path, sft_steps=5, batch_size=16)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), m2.parameters(), strict=True))
    with pytest.raises(ValueError, match="unknown tiny-policy setting"):
        tiny_policy_dir("multi_answer", tmp_path, width=3)


@pytest.mark.slow
def test_default_build_is_broad_and_better_than_uniform(tmp_path: Path) -> None:
    from qdevolve.rl.tasks import get_task
    from qdevolve.rl.tasks.runner import evaluate_policy, summarize

    model, tok = load_tiny_policy("multi_answer", tmp_path)
    info = json.loads((tiny_policy_dir("multi_answer", tmp_path) / "qdevolve_tiny.json").read_text())
    task = get_task("multi_answer")
    evals = evaluate_policy(task, model, tok, n=64)
    uniform = np.mean([task.n_solutions(p) / 900 for p in task.prompts()])
    res = summarize(evals, ks=(1, 64))
    assert res["pass@1"] > 1.5 * uniform
    assert res["D_64"] > 2  # several distinct correct answers per prompt: a broad base
    assert info["sft_seconds"] > 0
