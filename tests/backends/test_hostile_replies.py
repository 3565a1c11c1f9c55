"""OpenAIBackend against a hostile OpenAI-compatible server (real HTTP on 127.0.0.1).

Every attack ends as completions with a one-line, terminal-safe reason (or, for the lone
surrogate, as usable text), within the time and byte bounds, and never as an exception.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import time
import tracemalloc

import pytest

from qdevolve.backends._body import BodyTooLarge, read_capped
from qdevolve.backends.base import GenerationRequest
from qdevolve.backends.openai_backend import OpenAIBackend, endpoint_of
from qdevolve.errors import RunAborted
from qdevolve.testing import Reply, ScriptedServer
from qdevolve.testing.hostile import HOSTILE_MODES, HostileScript, gzip_bomb
from qdevolve.testing.programs import CIRCLE_PACKING

PROMPT = f"# Current program\n```python\n{CIRCLE_PACKING}```\nAnswer with <<<<<<< SEARCH blocks."
CAP = 256 * 1024


def req(n: int = 1) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": PROMPT}], n=n)


def generate(backend: OpenAIBackend, requests: list[GenerationRequest]):
    async def go():
        try:
            return await backend.generate(requests)
        finally:
            await backend.aclose()

    return asyncio.run(go())


def backend_for(url: str, **kw) -> OpenAIBackend:
    settings = dict(model="m", timeout_s=1.5, retries=1, retry_base_s=0.01, max_response_bytes=CAP)
    settings.update(kw)
    return OpenAIBackend(api_base=url, **settings)


def _safe_one_line(text: str) -> bool:
    return not any(ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 or 0xD800 <= ord(ch) < 0xE000 or ch == "\u202e"
                   for ch in text)


EXPECT = {
    "endless_stream": "max_response_bytes",
    "gzip_bomb": "max_response_bytes",
    "slow_loris": "timed out",
    "finish_reason_object": "finish_reason is an object",
    "huge_tokens": "usage.prompt_tokens = 18446744073709551623 is outside",
    "negative_tokens": "usage.prompt_tokens = -5",
    "reply_50mb": "max_response_bytes",
    "escape_error": "HTTP 400",
    "no_choices": "no 'choices' list",
    "odd_choices": "malformed reply: choices[",
    "deep_json": "not usable JSON",
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", [m for m in HOSTILE_MODES if m not in ("lone_surrogate", "fixed_code_attack")])
def test_each_attack_is_a_failed_completion_with_a_safe_one_line_reason(mode: str) -> None:
    script = HostileScript(mode, bomb_bytes=64 * 2**20, big_bytes=8 * 2**20, loris_delay_s=0.5)
    with ScriptedServer(script) as server:
        b = backend_for(server.url)
        t0 = time.monotonic()
        out = generate(b, [req(n=2)])
        elapsed = time.monotonic() - t0
    comps = out[0]
    assert len(comps) == 2
    for c in comps:
        assert c.text == "" and c.finish_reason == "error", (mode, c)
        assert EXPECT[mode] in c.error, (mode, c.error)
        assert _safe_one_line(c.error) and len(c.error) <= b.max_error_chars, c.error
        assert 0 <= c.prompt_tokens < 2**31 and 0 <= c.completion_tokens < 2**31
    assert elapsed < 2 * b.max_request_s + 1.0, f"{mode} took {elapsed:.1f}s"


def test_escape_error_body_reaches_nobody_raw() -> None:
    with ScriptedServer(HostileScript("escape_error")) as server:
        out = generate(backend_for(server.url, native_n=False), [req(n=2)])[0]
    for c in out:  # a raw body, and a JSON body whose message decodes to escapes
        err = c.error
        assert "\x1b" not in err and "\r" not in err and "\x00" not in err and "\n" not in err
        assert "\\e]52" in err and "\\e[6n" in err, "escapes are shown visibly, not dropped silently"


def test_lone_surrogates_become_replacement_characters() -> None:
    with ScriptedServer(HostileScript("lone_surrogate")) as server:
        c = generate(backend_for(server.url), [req()])[0][0]
    assert c.error is None and "<<<<<<< SEARCH" in c.text
    assert "\ufffd" in c.text and not any(0xD800 <= ord(ch) < 0xE000 for ch in c.text)
    c.text.encode("utf-8")  # storable


@pytest.mark.slow
def test_slow_loris_is_bounded_by_the_total_request_deadline() -> None:
    # one byte every 0.2 s: every read succeeds, so only a total deadline stops it
    with ScriptedServer(HostileScript("slow_loris", loris_delay_s=0.2)) as server:
        b = backend_for(server.url, timeout_s=1.0, retries=5, max_request_s=1.6)
        t0 = time.monotonic()
        c = generate(b, [req()])[0][0]
        elapsed = time.monotonic() - t0
    assert c.finish_reason == "error" and elapsed < 2.5, (elapsed, c.error)


def test_gzip_bomb_never_inflates_past_the_cap() -> None:
    """The decoded bytes held stay near the cap although the body inflates to 1 GiB."""
    with ScriptedServer(HostileScript("gzip_bomb", bomb_bytes=2**30)) as server:
        b = backend_for(server.url, max_response_bytes=4 * 2**20)
        tracemalloc.start()
        try:
            c = generate(b, [req()])[0][0]
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert "max_response_bytes" in c.error
    assert peak < 64 * 2**20, f"peak traced memory {peak / 2**20:.0f} MiB"


def test_declared_content_length_over_the_cap_is_refused_unread() -> None:
    big = json.dumps({"choices": [{"message": {"content": "x" * (2 * CAP)}}]}).encode()
    with ScriptedServer(lambda r: Reply(raw=big)) as server:
        c = generate(backend_for(server.url), [req()])[0][0]
    assert "max_response_bytes" in c.error


def test_gzip_reply_within_the_cap_is_decoded() -> None:
    body = {"choices": [{"message": {"content": "hello"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    raw = gzip.compress(json.dumps(body).encode())
    with ScriptedServer(lambda r: Reply(raw=raw, headers={"Content-Encoding": "gzip"})) as server:
        c = generate(backend_for(server.url), [req()])[0][0]
    assert c.error is None and c.text == "hello" and c.prompt_tokens == 3


def test_unsupported_encoding_is_refused() -> None:
    with ScriptedServer(lambda r: Reply(raw=b"abc", headers={"Content-Encoding": "br"})) as server:
        c = generate(backend_for(server.url), [req()])[0][0]
    assert "unsupported Content-Encoding" in c.error


def test_read_capped_multi_member_gzip_counts_every_member() -> None:
    class Resp:
        headers = {"content-encoding": "gzip"}

        def __init__(self, data: bytes) -> None:
            self.data = data

        async def aiter_raw(self):
            for i in range(0, len(self.data), 4096):
                yield self.data[i:i + 4096]

    bomb = gzip_bomb(8 * 2**20)
    with pytest.raises(BodyTooLarge):
        asyncio.run(read_capped(Resp(bomb), 2**20))
    two = gzip.compress(b"a" * 1000) + gzip.compress(b"b" * 1000)
    assert asyncio.run(read_capped(Resp(two), 2**20)) == b"a" * 1000 + b"b" * 1000


def test_retry_after_beyond_the_run_deadline_is_not_waited_for() -> None:
    with ScriptedServer(lambda r: Reply(status=429, headers={"Retry-After": "30"})) as server:
        b = backend_for(server.url, retries=3, retry_max_s=60.0)
        b.set_deadline(time.time() + 2.0)
        t0 = time.monotonic()
        c = generate(b, [req()])[0][0]
        elapsed = time.monotonic() - t0
    assert "HTTP 429" in c.error and elapsed < 1.0 and len(server.requests) == 1


@pytest.mark.slow
def test_requests_in_flight_are_abandoned_at_the_wall_time_deadline() -> None:
    # the deadline leaves time to send both requests even on a loaded machine; the replies
    # would take 10 s
    with ScriptedServer(lambda r: Reply(text="late", delay_s=10.0)) as server:
        b = backend_for(server.url, timeout_s=30.0, retries=3)
        b.set_deadline(time.time() + 2.0)
        t0 = time.monotonic()
        out = generate(b, [req(), req()])
        elapsed = time.monotonic() - t0
        after = generate(b, [req()])[0][0]
    assert elapsed < 4.0
    assert all("wall-time deadline" in o[0].error for o in out)
    assert "wall time is over" in after.error and len(server.requests) == 2, "nothing sent after the end"


def test_consecutive_connection_failures_abort_the_run_naming_the_endpoint(monkeypatch) -> None:
    server = ScriptedServer(lambda r: "x")
    port = server._httpd.server_address[1]
    server.stop()  # the port is closed now
    monkeypatch.setenv("QDEVOLVE_TEST_KEY", "sk-secret-0123456789")
    url = f"http://user:hunter2@127.0.0.1:{port}/v1?token=abc"
    b = OpenAIBackend(api_base=url, model="m", retries=0, max_connection_failures=3,
                      api_key_env="QDEVOLVE_TEST_KEY")
    first = generate(b, [req(), req()])  # two failures: under the limit, plain failed completions
    assert all("connection error" in o[0].error for o in first)
    with pytest.raises(RunAborted) as info:
        generate(b, [req()])
    msg = str(info.value)
    assert f"127.0.0.1:{port}/v1" in msg and "3 requests in a row" in msg and "\n" not in msg
    for secret in ("hunter2", "sk-secret", "token=abc", "user:"):
        assert secret not in msg
    with pytest.raises(RunAborted):  # stays aborted
        generate(b, [req()])


def test_a_reachable_server_resets_the_failure_count() -> None:
    with ScriptedServer(lambda r: Reply(status=500)) as server:
        b = OpenAIBackend(api_base=server.url, model="m", retries=0, max_connection_failures=2)
        for _ in range(4):  # HTTP errors are not connection failures
            assert "HTTP 500" in generate(b, [req()])[0][0].error


def test_endpoint_of_drops_credentials_and_query() -> None:
    assert endpoint_of("https://u:p@host.example:8443/v1/chat?key=1#f") == "https://host.example:8443/v1/chat"


@pytest.mark.slow
def test_a_host_that_never_answers_the_connect_counts_as_a_connection_failure() -> None:
    """A listener whose backlog is full drops new SYNs: the connect times out after half an attempt."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(c)
    try:
        b = OpenAIBackend(api_base=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=3.0, retries=0,
                          max_connection_failures=2)
        t0 = time.monotonic()
        first = generate(b, [req()])[0][0]
        assert "connection error: ConnectTimeout" in first.error and time.monotonic() - t0 < 2.5, first.error
        with pytest.raises(RunAborted, match=f"127.0.0.1:{port}/v1"):
            generate(b, [req()])
    finally:
        for c in fillers + [listener]:
            c.close()
