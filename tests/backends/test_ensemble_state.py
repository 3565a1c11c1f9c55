"""The LLM ensemble's model-choice state survives a JSON round trip (what resume stores)."""

from __future__ import annotations

import asyncio
import json

import pytest

from qdevolve.backends._ensemble import ModelChooser, parse_models
from qdevolve.backends.base import GenerationRequest
from qdevolve.backends.openai_backend import OpenAIBackend
from qdevolve.errors import QdevolveError
from qdevolve.testing import ScriptedServer

MODELS = [{"name": "a", "weight": 1.0}, {"name": "b", "weight": 2.0}, {"name": "c", "weight": 0.5}]


def reward(model: str, step: int) -> float:
    return {"a": 0.3, "b": 0.1, "c": 0.6}[model] + 0.05 * ((step * 7) % 3)


def play(chooser: ModelChooser, steps: int, start: int = 0) -> list[str]:
    picks = []
    for i in range(start, start + steps):
        name = chooser.pick().name
        chooser.report(name, reward(name, i))
        picks.append(name)
    return picks


@pytest.mark.parametrize("bandit", [True, False])
def test_restore_gives_the_same_next_choices_as_an_uninterrupted_chooser(bandit: bool) -> None:
    whole = ModelChooser(parse_models(None, MODELS), bandit=bandit, exploration=0.5, seed=11)
    expected = play(whole, 60)

    first = ModelChooser(parse_models(None, MODELS), bandit=bandit, exploration=0.5, seed=11)
    head = play(first, 25)
    stored = json.loads(json.dumps(first.state()))  # what the store keeps
    resumed = ModelChooser(parse_models(None, MODELS), bandit=bandit, exploration=0.5, seed=11)
    resumed.restore(stored)
    assert head + play(resumed, 35, start=25) == expected
    assert resumed.state() == whole.state()


def test_a_fresh_chooser_without_restore_diverges() -> None:
    """The test above can fail: without the stored state the choices differ."""
    whole = ModelChooser(parse_models(None, MODELS), bandit=True, exploration=0.5, seed=11)
    expected = play(whole, 60)
    first = ModelChooser(parse_models(None, MODELS), bandit=True, exploration=0.5, seed=11)
    head = play(first, 25)
    fresh = ModelChooser(parse_models(None, MODELS), bandit=True, exploration=0.5, seed=11)
    assert head + play(fresh, 35, start=25) != expected


def test_backend_state_round_trip_over_http() -> None:
    def req() -> GenerationRequest:
        return GenerationRequest(messages=[{"role": "user", "content": "hi"}])

    def make() -> OpenAIBackend:
        return OpenAIBackend(api_base=server.url, models=MODELS, bandit=True, bandit_exploration=0.3, seed=5)

    async def drive(b: OpenAIBackend, steps: int, start: int) -> list[str]:
        out = []
        for i in range(start, start + steps):
            c = (await b.generate([req()]))[0][0]
            b.report(c.model, reward(c.model, i))
            out.append(c.model)
        await b.aclose()
        return out

    with ScriptedServer(lambda r: "ok") as server:
        expected = asyncio.run(drive(make(), 20, 0))
        first = make()
        head = asyncio.run(drive(first, 8, 0))
        second = make()
        second.restore(json.loads(json.dumps(first.state())))
        assert head + asyncio.run(drive(second, 12, 8)) == expected


def test_restore_drops_unknown_models_and_rejects_malformed_state() -> None:
    chooser = ModelChooser(parse_models(None, MODELS), bandit=True)
    chooser.restore({"counts": {"a": 2, "gone": 5}, "sums": {"a": 1.0, "gone": 3.0}})
    assert chooser.counts == {"a": 2} and chooser.sums == {"a": 1.0}
    for bad, field in [({"counts": {"a": -1}, "sums": {"a": 0.0}}, "counts"),
                       ({"counts": {"a": 1}, "sums": {"a": float("nan")}}, "sums"),
                       ({"counts": {"a": 1}, "sums": {}}, "different models"),
                       ({"rng": "nope"}, "rng"),
                       ([], "not an object")]:
        with pytest.raises(QdevolveError, match=field):
            chooser.restore(bad)
