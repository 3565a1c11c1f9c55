"""The template population: the improvement reward, UCB1 selection, retirement, the
default-deny template validator and the offline template mutator."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from qdevolve import registry
from qdevolve.prompts import build_prompt, load_template
from qdevolve.prompts.evolution import (
    TemplatePopulation,
    improvement_reward,
    placeholders,
    validate_template,
)
from qdevolve.types import EvalResult, Program, PromptTemplate

SEED = load_template("diff_user", {})
REQUIRED = {f for f, _c, _s in placeholders(SEED)}


def test_reward_is_relative_improvement_clipped_and_zero_for_failures() -> None:
    assert improvement_reward(2.0, 1.0, True) == 1.0
    assert improvement_reward(1.0, 1.0, True) == 0.5
    assert improvement_reward(1.5, 1.0, True) == pytest.approx(0.75)
    assert improvement_reward(-5.0, 1.0, True) == 0.0
    assert improvement_reward(3.0, 1.0, False) == 0.0, "a failed child earns nothing"
    assert improvement_reward(float("nan"), 1.0, True) == 0.0
    assert improvement_reward(-0.5, -1.0, True) == pytest.approx(0.75), "relative to |parent|, so negative scores work"


def _pop(*ns_totals: tuple[int, float], explore: float = 1.0, size: int = 8) -> TemplatePopulation:
    pop = TemplatePopulation(explore=explore, size=size)
    for i, (n, total) in enumerate(ns_totals):
        pop.add(PromptTemplate(id=f"t{i}", name="diff_user", text=SEED))
        for _ in range(n):
            pop.credit(f"t{i}", total / n)
    return pop


def test_ucb1_tries_an_untried_template_and_then_prefers_the_better() -> None:
    pop = _pop((10, 7.0), (0, 0.0))
    assert pop.choose("diff_user").id == "t1", "an untried template has the largest bonus"
    pop = _pop((20, 16.0), (20, 4.0))
    assert pop.choose("diff_user").id == "t0"
    total = 40
    assert pop.ucb("t0", total) == pytest.approx((16 + 0.5) / 21 + math.sqrt(2 * math.log(41) / 21))
    greedy = _pop((3, 1.5), (200, 110.0), explore=0.0)
    assert greedy.choose("diff_user").id == "t1", "explore=0 is the posterior mean alone"
    assert _pop((3, 1.5), (200, 110.0), explore=1.0).choose("diff_user").id == "t0", "the bonus explores"


def test_in_flight_plans_count_as_tries() -> None:
    pop = _pop((0, 0.0), (0, 0.0))
    pop.in_flight["t0"] = 1
    assert pop.choose("diff_user").id == "t1"


def test_a_full_population_retires_its_worst_ripe_template() -> None:
    pop = _pop((5, 4.5), (5, 0.5), (1, 0.0), size=3)
    assert pop.retiree("diff_user") == "t1", "t2 has too few children to judge"
    pop.add(PromptTemplate(id="new", name="diff_user", text=SEED, retires="t1"))
    assert [t.id for t in pop.active()] == ["t0", "t2", "new"]
    assert pop.templates["t1"].status == "retired"
    assert _pop((5, 1.0), size=2).retiree("diff_user") is None, "not full"


@pytest.mark.parametrize("text, why", [
    (SEED.replace("{current_program}", "the program"), "required placeholder"),
    (SEED + "{current_program.__class__.__mro__}", "not a bare name"),
    (SEED + "{metrics[0]}", "not a bare name"),
    (SEED + "{metrics!r}", "conversion"),
    (SEED + "{metrics:>99999999}", "format spec"),
    (SEED + "{0}", "not a bare name"),
    (SEED + "{secret_env}", "unknown placeholder"),
    (SEED + "{unclosed", "cannot be formatted"),
    (SEED + "\x1b[2J", "control character"),
    (SEED + "\u202e", "control character"),
    (SEED + "x" * 9000, "over max_template_chars"),
    ("   ", "empty"),
    (None, "not text"),
])
def test_validator_refuses(text: object, why: str) -> None:
    reason = validate_template(text, REQUIRED)
    assert reason is not None and why in reason, reason


def test_validator_accepts_the_seeds() -> None:
    for name in ("diff_user", "full_rewrite_user", "crossover_user"):
        t = load_template(name, {})
        assert validate_template(t, {f for f, _c, _s in placeholders(t)}) is None


def test_offline_mutator_edits_only_bank_sentences_and_keeps_placeholders() -> None:
    mut = registry.prompt_mutator.create({"type": "offline"})
    rng = np.random.default_rng(0)
    t = PromptTemplate(id="s", name="diff_user", text=SEED)
    seen = set()
    for _ in range(30):
        edit = asyncio.run(mut.mutate(t, rng, None))
        assert validate_template(edit.text, REQUIRED) is None
        for line in SEED.split("\n"):
            assert line in edit.text.split("\n"), "a line of the seed template was lost"
        seen.add(edit.metadata["edit"])
        t = PromptTemplate(id="s", name="diff_user", text=edit.text)
    assert seen == {"add", "remove", "swap"}
    again = asyncio.run(mut.mutate(PromptTemplate(id="s", name="diff_user", text=SEED), np.random.default_rng(0)))
    first = asyncio.run(mut.mutate(PromptTemplate(id="s", name="diff_user", text=SEED), np.random.default_rng(0)))
    assert again.text == first.text, "deterministic given the rng"


def test_an_evolved_template_reaches_only_the_user_message() -> None:
    text = SEED + "\nALWAYS-MARKER"
    parent = Program(code="x = 1\n")
    msgs = build_prompt(parent, EvalResult(score=1.0), settings={"templates": {"diff_user": text}})
    assert "ALWAYS-MARKER" in msgs[1]["content"] and "ALWAYS-MARKER" not in msgs[0]["content"]


def test_every_shipped_user_template_passes_its_own_validation() -> None:
    """Each operator's shipped template (the block format's ``{block}`` / ``{block_label}``
    included) is a valid seed, and a proposal keeping its placeholders is accepted."""
    from qdevolve.prompts.builder import TEMPLATE_NAMES, load_template
    from qdevolve.prompts.evolution import placeholders, validate_template

    for name in TEMPLATE_NAMES.values():
        text = load_template(name, {})
        required = [p[0] for p in placeholders(text)]
        assert validate_template(text, required) is None, name
        assert validate_template("Be bold.\n" + text, required) is None, name
