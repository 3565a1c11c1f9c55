"""OpenAIBackend against the real scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import logging
import time

import httpx
import pytest

from qdevolve import registry
from qdevolve.backends.base import Completion, GenerationRequest
from qdevolve.backends.openai_backend import OpenAIBackend, parse_chat_response
from qdevolve.testing import FailFirst, Reply, ScriptedServer


def echo(req):
    return f"reply to {req['model']} #{req['_choice']}"


def run(backend: OpenAIBackend, requests: list[GenerationRequest]) -> list[list[Completion]]:
    async def go():
        try:
            return await backend.generate(requests)
        finally:
            await backend.aclose()

    return asyncio.run(go())


def req(n: int = 1, **kw) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": "hi"}], n=n, **kw)


def test_n_completions_with_usage_model_and_policy_version():
    with ScriptedServer(echo) as server:
        b = OpenAIBackend(api_base=server.url, model="m1", temperature=0.3)
        b.load_policy(4, None)
        out = run(b, [req(n=3), req(n=1, seed=7, stop=["\n\n"])])
    assert [len(x) for x in out] == [3, 1]
    assert [c.text for c in out[0]] == ["reply to m1 #0", "reply to m1 #1", "reply to m1 #2"]
    c = out[0][0]
    assert c.error is None and c.finish_reason == "stop" and c.model == "m1" and c.policy_version == 4
    assert c.prompt_tokens > 0 and c.completion_tokens > 0 and c.latency_s >= 0
    assert len(server.requests) == 2
    # the two requests run concurrently: tell them apart by content, not arrival order
    first = next(r for r in server.requests if r.get("seed") != 7)
    second = next(r for r in server.requests if r.get("seed") == 7)
    assert first["n"] == 3 and first["temperature"] == 0.3 and first["messages"][0]["content"] == "hi"
    assert second["seed"] == 7 and second["stop"] == ["\n\n"] and "n" not in second


def test_retries_on_500_then_succeeds():
    script = FailFirst(2, echo, status=500)
    with ScriptedServer(script) as server:
        b = OpenAIBackend(api_base=server.url, model="m", retries=3, retry_base_s=0.01)
        out = run(b, [req()])
    assert out[0][0].text == "reply to m #0" and out[0][0].error is None
    assert len(server.requests) == 3 and b.stats["retries"] == 2


def test_429_honours_retry_after_and_gives_up_after_retries():
    with ScriptedServer(lambda r: Reply(status=429, headers={"Retry-After": "0.05"})) as server:
        b = OpenAIBackend(api_base=server.url, model="m", retries=2, retry_base_s=5.0, retry_max_s=10.0)
        t0 = time.monotonic()
        out = run(b, [req(n=2)])
        elapsed = time.monotonic() - t0
    assert len(server.requests) == 3  # 1 + 2 retries
    assert elapsed < 2.0  # Retry-After (0.05 s) was used, not the 5 s base delay
    assert all(c.text == "" and c.finish_reason == "error" and "HTTP 429" in c.error for c in out[0])
    assert len(out[0]) == 2


def test_permanent_error_is_not_retried():
    with ScriptedServer(lambda r: Reply(status=400)) as server:
        b = OpenAIBackend(api_base=server.url, model="m", retries=3, retry_base_s=0.01)
        out = run(b, [req()])
    assert len(server.requests) == 1 and "HTTP 400" in out[0][0].error


def test_timeout_becomes_error_completion():
    with ScriptedServer(lambda r: Reply(text="late", delay_s=3.0)) as server:
        b = OpenAIBackend(api_base=server.url, model="m", timeout_s=0.3, retries=1, retry_base_s=0.01)
        t0 = time.monotonic()
        out = run(b, [req()])
        elapsed = time.monotonic() - t0
    assert "timed out" in out[0][0].error and out[0][0].finish_reason == "error"
    assert len(server.requests) == 2 and elapsed < 2.5


def test_connection_refused_becomes_error_completion():
    server = ScriptedServer(echo)
    url = server.url
    server.stop()  # the port is closed now
    b = OpenAIBackend(api_base=url, model="m", retries=1, retry_base_s=0.01)
    out = run(b, [req()])
    assert "connection error" in out[0][0].error


def test_non_json_reply_becomes_error_completion():
    with ScriptedServer(lambda r: Reply(raw=b"<html>oops</html>")) as server:
        b = OpenAIBackend(api_base=server.url, model="m", retries=2)
        out = run(b, [req()])
    assert "not JSON" in out[0][0].error and len(server.requests) == 1


def test_concurrency_limit_is_respected_at_the_server():
    with ScriptedServer(echo, latency_s=0.15) as server:
        b = OpenAIBackend(api_base=server.url, model="m", concurrency=3)
        t0 = time.monotonic()
        out = run(b, [req() for _ in range(9)])
        elapsed = time.monotonic() - t0
    assert len(out) == 9 and all(o[0].error is None for o in out)
    assert server.max_in_flight == 3
    assert elapsed >= 3 * 0.15 - 0.02  # three waves


def test_key_is_sent_but_never_in_repr_config_or_logs(monkeypatch, caplog):
    secret = "sk-qdevolve-test-0123456789abcdef"
    monkeypatch.setenv("QDEVOLVE_TEST_KEY", secret)
    caplog.set_level(logging.DEBUG)
    script = FailFirst(1, echo, status=500)
    with ScriptedServer(script) as server:
        b = OpenAIBackend(api_base=server.url, model="m", api_key_env="QDEVOLVE_TEST_KEY", retries=1, retry_base_s=0.01)
        out = run(b, [req()])
        bad = OpenAIBackend(api_base=server.url, model="m", api_key_env="QDEVOLVE_TEST_KEY", retries=0)
        server.script = lambda r: Reply(status=401)
        out_bad = run(bad, [req()])
    assert server.headers[0]["Authorization"] == f"Bearer {secret}"
    assert out[0][0].error is None
    for text in (repr(b), str(b.config()), caplog.text, str(vars(b)), out_bad[0][0].error):
        assert secret not in text
    assert "HTTP 401" in out_bad[0][0].error and "retry" in caplog.text


def test_no_key_header_when_variable_unset(monkeypatch):
    monkeypatch.delenv("QDEVOLVE_UNSET_KEY", raising=False)
    with ScriptedServer(echo) as server:
        run(OpenAIBackend(api_base=server.url, model="m", api_key_env="QDEVOLVE_UNSET_KEY"), [req()])
    assert "Authorization" not in server.headers[0]


def test_api_key_env_must_be_a_name():
    with pytest.raises(ValueError, match="NAME of an environment variable"):
        OpenAIBackend(model="m", api_key_env="sk-abc-123")


def test_logprobs_parsed_when_server_returns_them():
    with ScriptedServer(echo) as server:
        out = run(OpenAIBackend(api_base=server.url, model="m", logprobs=True), [req(n=2)])
    assert server.requests[0]["logprobs"] is True
    for c in out[0]:
        assert len(c.logprobs) == c.completion_tokens > 0 and all(lp == -0.25 for lp in c.logprobs)


def test_weighted_ensemble_draws_models_by_weight():
    with ScriptedServer(echo) as server:
        b = OpenAIBackend(api_base=server.url, models=[{"name": "big", "weight": 3}, {"name": "small", "weight": 1}], seed=0)
        out = run(b, [req() for _ in range(120)])
    seen = [r["model"] for r in server.requests]
    share = seen.count("big") / len(seen)
    assert 0.62 < share < 0.88
    assert {o[0].model for o in out} == {"big", "small"}


def test_bandit_prefers_rewarded_model():
    with ScriptedServer(echo) as server:
        b = OpenAIBackend(api_base=server.url, models=["good", "bad"], bandit=True, bandit_exploration=0.2, seed=1)

        async def loop():
            for _ in range(40):
                c = (await b.generate([req()]))[0][0]
                b.report(c.model, 1.0 if c.model == "good" else 0.0)
            await b.aclose()

        asyncio.run(loop())
    seen = [r["model"] for r in server.requests]
    assert seen[:2] == ["good", "bad"]  # every arm once
    assert seen[2:].count("good") >= 30
    state = b.chooser.state()
    assert state["counts"]["good"] + state["counts"]["bad"] == 40


def test_native_n_false_sends_one_request_per_completion():
    with ScriptedServer(echo) as server:
        out = run(OpenAIBackend(api_base=server.url, model="m", native_n=False), [req(n=3)])
    assert len(out[0]) == 3 and len(server.requests) == 3
    assert all("n" not in r for r in server.requests)


def test_backend_survives_several_event_loops_and_registry_create():
    with registry.snapshot(), ScriptedServer(echo) as server:
        b = registry.backend.create({"type": "openai", "api_base": server.url, "model": "m"})
        assert isinstance(b, OpenAIBackend)
        assert asyncio.run(b.generate([req()]))[0][0].text == "reply to m #0"
        assert asyncio.run(b.generate([req()]))[0][0].text == "reply to m #0"
        b.close()
        models = httpx.get(server.url + "/models").json()
    assert models["data"][0]["id"] == "scripted"


def test_prompt_requests_use_the_completions_endpoint():
    with ScriptedServer(lambda r: "continued") as server:
        out = run(OpenAIBackend(api_base=server.url, model="m"), [GenerationRequest(prompt="def f():")])
    assert out[0][0].text == "continued" and server.requests[0]["prompt"] == "def f():"


def test_completions_endpoint_logprobs_and_vllm_token_ids():
    with ScriptedServer(lambda r: "abcdefgh") as server:
        out = run(OpenAIBackend(api_base=server.url, model="m", logprobs=True), [GenerationRequest(prompt="p")])
    assert server.requests[0]["logprobs"] == 1 and out[0][0].logprobs == [-0.25, -0.25]
    body = {"choices": [{"message": {"content": "hi"}, "finish_reason": "length", "logprobs": {"content": [
        {"token": "token_id:17", "logprob": -0.5}, {"token": "token_id:4", "logprob": -1.5}]}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2}}
    (c,) = parse_chat_response(body, model="m", latency_s=0.0)
    assert c.token_ids == [17, 4] and c.logprobs == [-0.5, -1.5] and c.finish_reason == "length"
    assert c.prompt_tokens == 9 and c.completion_tokens == 2
