"""The metered wrapper: every completion of every view lands once on the run's meter."""

from __future__ import annotations

import asyncio

from qdevolve.backends.base import GenerationRequest
from qdevolve.backends.metered import MeteredBackend, meter_clients
from qdevolve.backends.openai_backend import OpenAIBackend
from qdevolve.evolve.setup.budget import BudgetMeter
from qdevolve.testing.scripted_server import ScriptedServer


class _Holder:
    def __init__(self, backend) -> None:
        self.backend = backend
        self.name = "not a client"


def test_views_bill_their_spender_once_and_wrapping_is_idempotent() -> None:
    meter = BudgetMeter.from_config({"max_tokens": 10**6})
    with ScriptedServer(lambda req: "one two three") as server:
        raw = OpenAIBackend(api_base=server.url, model="scripted")
        engine = MeteredBackend(raw, meter.spend, "engine")
        agent = engine.for_spender("agent:abc")
        nested = MeteredBackend(agent, meter.spend, "judge")  # wraps the raw backend, not the view
        holder = _Holder(raw)
        assert meter_clients(holder, meter.spend, "operator:x") == ["backend"]
        assert meter_clients(holder, meter.spend, "operator:x") == ["backend"]  # re-wrapped, not stacked
        assert holder.backend.inner is raw and nested.inner is raw

        async def ask() -> None:
            for client in (engine, agent, agent, nested, holder.backend):
                (group,) = await client.generate([GenerationRequest(prompt="hi", n=1)])
                assert group[0].text == "one two three"

        asyncio.run(ask())
        assert engine.close == raw.close  # other attributes are the inner backend's
        asked = len(server.requests)
    state = meter.state()
    assert {k: v["calls"] for k, v in state["spenders"].items()} == {"engine": 1, "agent:abc": 2, "judge": 1,
                                                                     "operator:x": 1}
    assert state["models"]["scripted"]["calls"] == asked == 5
    assert state["tokens"] == sum(v["prompt_tokens"] + v["completion_tokens"] for v in state["spenders"].values()) > 0


def test_a_state_stored_before_spenders_is_the_engines() -> None:
    old = {"tokens": 30, "cost": 0.0, "models": {"m": {"calls": 2, "prompt_tokens": 10, "completion_tokens": 20}}}
    meter = BudgetMeter.from_config(None, old)
    assert meter.state()["spenders"] == {"engine": {"calls": 2, "prompt_tokens": 10, "completion_tokens": 20,
                                                    "cost": 0.0}}
