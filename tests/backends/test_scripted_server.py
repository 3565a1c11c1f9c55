"""The scripted OpenAI-compatible server: protocol, built-in scripts, subprocess mode."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import httpx
import pytest

from qdevolve.backends.base import GenerationRequest
from qdevolve.backends.openai_backend import OpenAIBackend
from qdevolve.mutation.blocks import edits_inside_blocks
from qdevolve.mutation.diff import apply_diff, parse_diff
from qdevolve.mutation.rewrite import code_from_reply, splice_into
from qdevolve.prompts import build_prompt
from qdevolve.testing import Cycle, GarbageScript, Reply, ScriptedModel, ScriptedServer, make_script
from qdevolve.testing.programs import CIRCLE_PACKING, CIRCLE_PACKING_VARIANT, score_circle_packing
from qdevolve.types import EvalResult, Program

PARENT = Program(code=CIRCLE_PACKING)
RESULT = EvalResult(score=1.66)


def chat(messages):
    return {"model": "scripted", "messages": messages}


def test_scripted_model_answers_each_edit_format_validly():
    model = ScriptedModel(seed=0)
    diff = model(chat(build_prompt(PARENT, RESULT, [], edit_format="diff")))
    child, _ = apply_diff(CIRCLE_PACKING, parse_diff(diff))
    assert child != CIRCLE_PACKING and edits_inside_blocks(CIRCLE_PACKING, child)
    rewrite = model(chat(build_prompt(PARENT, RESULT, [], edit_format="rewrite")))
    child = splice_into(CIRCLE_PACKING, code_from_reply(rewrite, "python"))
    assert child != CIRCLE_PACKING and score_circle_packing(child) > 0
    msgs = build_prompt(PARENT, RESULT, [(Program(code="x = 1"), RESULT)], edit_format="crossover",
                        other_parents=[(Program(code=CIRCLE_PACKING_VARIANT), RESULT)])
    child = splice_into(CIRCLE_PACKING, code_from_reply(model(chat(msgs)), "python"))
    assert child != CIRCLE_PACKING and score_circle_packing(child) > 0


def test_format_detection_ignores_the_word_crossover_in_inspirations():
    insp = [(Program(code=CIRCLE_PACKING_VARIANT, operator="crossover"), RESULT)]
    reply = ScriptedModel(seed=0)(chat(build_prompt(PARENT, RESULT, insp, edit_format="diff")))
    assert "<<<<<<< SEARCH" in reply


def test_scripted_model_understands_openevolve_prompts():
    sampler_mod = pytest.importorskip("openevolve.prompt.sampler")
    config_mod = pytest.importorskip("openevolve.config")
    sampler = sampler_mod.PromptSampler(config_mod.PromptConfig())
    for diff in (True, False):
        p = sampler.build_prompt(
            current_program=CIRCLE_PACKING, parent_program=CIRCLE_PACKING, program_metrics={"combined_score": 1.6},
            previous_programs=[{"id": "a", "code": CIRCLE_PACKING_VARIANT, "metrics": {"combined_score": 1.5}}],
            top_programs=[{"id": "b", "code": CIRCLE_PACKING_VARIANT, "metrics": {"combined_score": 1.55}}],
            language="python", evolution_round=3, diff_based_evolution=diff,
        )
        reply = ScriptedModel(seed=1)(chat([{"role": "system", "content": p["system"]}, {"role": "user", "content": p["user"]}]))
        if diff:
            child, _ = apply_diff(CIRCLE_PACKING, parse_diff(reply))
        else:
            child = splice_into(CIRCLE_PACKING, code_from_reply(reply, "python"))
        assert child != CIRCLE_PACKING and edits_inside_blocks(CIRCLE_PACKING, child)


def test_scripted_model_is_deterministic_given_its_seed():
    msgs = chat(build_prompt(PARENT, RESULT, [], edit_format="diff"))
    a, b = ScriptedModel(seed=5), ScriptedModel(seed=5)
    assert [a(msgs) for _ in range(3)] == [b(msgs) for _ in range(3)]
    assert len({ScriptedModel(seed=s)(msgs) for s in range(6)}) > 1


def test_cycle_alternates_scripts_and_sends_retries_to_the_same_script():
    cyc = Cycle([lambda r: "a", lambda r: "b"])
    assert [cyc({"q": i}) for i in range(3)] == ["a", "b", "a"]
    assert cyc({"q": 1}) == "b" and cyc({"q": 3}) == "b"
    plain = Cycle([lambda r: "a", lambda r: "b"], sticky=False)
    assert [plain({}) for _ in range(3)] == ["a", "b", "a"]


def test_mixed_script_failures_survive_client_retries():
    with ScriptedServer(make_script("mixed", timeout_delay_s=1.0)) as server:
        backend = OpenAIBackend(api_base=server.url, model="scripted", timeout_s=0.4, retries=2, retry_base_s=0.01)

        async def go():
            outs = []
            for i in range(18):  # one full cycle: valid, garbage, valid, garbage...
                msgs = build_prompt(PARENT, EvalResult(score=float(i)), [], edit_format="diff")
                outs.append((await backend.generate([GenerationRequest(messages=msgs, seed=i)]))[0][0])
            await backend.aclose()
            return outs

        outs = asyncio.run(go())
    errors = [c.error for c in outs if c.error]
    assert any("HTTP 500" in e for e in errors) and any("timed out" in e for e in errors)


def test_http_protocol_status_latency_and_models():
    def replies(req):
        return Reply(status=503, headers={"Retry-After": "1"}) if not req["messages"] else f"one {req['_choice']}"

    with ScriptedServer(replies, latency_s=lambda req: 0.0, model_name="tiny") as server:
        with httpx.Client() as c:
            ok = c.post(server.url + "/chat/completions", json={"model": "tiny", "messages": [{"role": "user", "content": "q"}], "n": 2, "logprobs": True})
            bad = c.post(server.url + "/chat/completions", json={"model": "tiny", "messages": []})
            models = c.get(server.url + "/models")
            missing = c.post(server.url + "/embeddings", json={})
    body = ok.json()
    assert ok.status_code == 200 and [ch["message"]["content"] for ch in body["choices"]] == ["one 0", "one 1"]
    assert body["usage"]["completion_tokens"] > 0 and body["choices"][0]["logprobs"]["content"]
    assert bad.status_code == 503 and bad.headers["retry-after"] == "1"
    assert models.json()["data"][0]["id"] == "tiny" and missing.status_code == 404
    assert server.max_in_flight == 1 and len(server.requests) == 2


def test_a_raising_script_is_an_http_500_with_the_reason():
    def broken(req):
        raise KeyError("oops")

    with ScriptedServer(broken) as server:
        r = httpx.post(server.url + "/chat/completions", json=chat([{"role": "user", "content": "q"}]))
    assert r.status_code == 500 and "KeyError" in r.json()["error"]["message"]
    assert server.script_errors == ["KeyError: 'oops'"]


def test_unknown_script_names_and_modes_are_errors():
    with pytest.raises(ValueError, match="unknown garbage mode"):
        GarbageScript("nonsense")
    with pytest.raises(ValueError, match="unknown script"):
        make_script("nonsense")


def test_subprocess_mode_serves_until_killed():
    proc = subprocess.Popen([sys.executable, "-m", "qdevolve.testing.scripted_server", "--script", "evolve", "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("URL http://127.0.0.1:")
        url = line.split()[1]
        msgs = build_prompt(PARENT, RESULT, [], edit_format="diff")
        r = httpx.post(url + "/chat/completions", json=chat(msgs), timeout=10)
        assert r.status_code == 200 and "<<<<<<< SEARCH" in r.json()["choices"][0]["message"]["content"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_openai_sdk_can_talk_to_the_server():
    openai = pytest.importorskip("openai")
    with ScriptedServer(ScriptedModel(seed=0)) as server:
        client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
        msgs = build_prompt(PARENT, RESULT, [], edit_format="rewrite")
        resp = client.chat.completions.create(model="scripted", messages=msgs, n=2, temperature=0.7, max_tokens=4096)
        client.close()
    assert len(resp.choices) == 2 and "```python" in resp.choices[1].message.content
    assert resp.usage.completion_tokens > 0 and resp.choices[0].finish_reason == "stop"
