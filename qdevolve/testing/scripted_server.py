"""A real OpenAI-compatible HTTP server on 127.0.0.1 whose replies come from a script.

For tests and benchmarks: the backend under test talks HTTP to it exactly as to vLLM or a
hosted API. A *script* is a callable ``(request_json) -> reply`` where the reply is a
string (the assistant message), or a :class:`Reply` (text, HTTP status, delay, raw body
bytes, a streamed body, finish reason). For ``n > 1`` the script is called once per choice (the choice index
is in ``request["_choice"]``). Built-in scripts live in :mod:`qdevolve.testing.scripts`.

Usage::

    with ScriptedServer(ScriptedModel(seed=0), latency_s=0.0) as server:
        backend = OpenAIBackend(api_base=server.url, model="scripted")

or as a subprocess (for benchmarks): ``python -m qdevolve.testing.scripted_server --script
evolve --latency 1.0 --port 0`` prints ``URL http://127.0.0.1:PORT/v1`` and serves until
killed.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Reply", "Script", "ScriptedServer", "main"]


@dataclass
class Reply:
    """One scripted reply.

    Attributes:
        text: Assistant message content.
        status: HTTP status (non-200 sends ``{"error": ...}``).
        delay_s: Extra seconds to wait before answering (on top of the server latency).
        raw: Raw response body bytes, sent as-is (overrides everything else).
        finish_reason: The choice's finish reason.
        headers: Extra response headers (e.g. ``Retry-After``, ``Content-Encoding``).
        stream: A callable returning the body as an iterable of byte chunks, sent as they
            come (chunked, unless ``headers`` give a ``Content-Length``); overrides ``raw``.
            The iterable may be endless: sending stops when the client hangs up.
        chunk_delay_s: Seconds to wait before each streamed chunk (a slow-loris server).
    """

    text: str = ""
    status: int = 200
    delay_s: float = 0.0
    raw: bytes | None = None
    finish_reason: str = "stop"
    headers: dict[str, str] = field(default_factory=dict)
    stream: Callable[[], Iterable[bytes]] | None = None
    chunk_delay_s: float = 0.0


Script = Callable[[dict[str, Any]], "str | Reply"]


def _as_reply(r: str | Reply) -> Reply:
    return r if isinstance(r, Reply) else Reply(text=str(r))


def _tokens(text: str) -> list[str]:
    """A crude tokenisation (about four characters per token) for usage and log-probs."""
    return [text[i:i + 4] for i in range(0, len(text), 4)]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out without a 40 ms delayed-ACK stall

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            pass

    def _send_stream(self, status: int, reply: Reply) -> None:
        """Send ``reply.stream`` chunk by chunk until it ends or the client hangs up."""
        assert reply.stream is not None
        headers = {k.lower(): v for k, v in reply.headers.items()}
        chunked = "content-length" not in headers
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.flush()
            for chunk in reply.stream():
                if reply.chunk_delay_s > 0:
                    time.sleep(reply.chunk_delay_s)
                if self.server.owner.stopped:
                    break
                if chunked:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                else:
                    self.wfile.write(chunk)
                self.wfile.flush()
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, OSError):  # the client gave up
            self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        if self.path.rstrip("/").endswith("/models"):
            data = {"object": "list", "data": [{"id": self.server.owner.model_name, "object": "model", "owned_by": "qdevolve"}]}
            self._send(200, json.dumps(data).encode())
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length") or 0)
        raw_req = self.rfile.read(length)
        owner = self.server.owner
        if not self.path.rstrip("/").endswith(("/chat/completions", "/completions")):
            self._send(404, b'{"error": {"message": "unknown path"}}')
            return
        try:
            req = json.loads(raw_req)
        except json.JSONDecodeError:
            self._send(400, b'{"error": {"message": "request body is not JSON"}}')
            return
        owner._enter(req, dict(self.headers))
        try:
            status, body, headers = owner._answer(req, chat=self.path.rstrip("/").endswith("/chat/completions"))
            if isinstance(body, Reply):
                self._send_stream(status, body)
                return
        finally:
            owner._leave()
        self._send(status, body, headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many clients connect at once (the default backlog of 5 drops SYNs)
    allow_reuse_address = True
    owner: ScriptedServer


class ScriptedServer:
    """The HTTP server, run in a background thread.

    Args:
        script: Reply source; default :class:`qdevolve.testing.scripts.ScriptedModel`.
        latency_s: Seconds every reply waits before it is sent (a model's think time), or a
            callable ``(request_json) -> seconds`` for per-reply latency.
        host, port: Bind address (``port=0`` picks a free port).
        model_name: The name listed by ``/v1/models``.

    Attributes:
        url: Base URL ending in ``/v1``.
        requests: Every request JSON received, in arrival order.
        headers: The headers of every request (to check what clients send).
        max_in_flight: Most requests handled at the same time so far.
        script_errors: Exceptions the script raised (each answered with HTTP 500).
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        latency_s: float | Callable[[dict[str, Any]], float] = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str = "scripted",
    ) -> None:
        if script is None:
            from qdevolve.testing.scripts import ScriptedModel

            script = ScriptedModel()
        self.script = script
        self.latency_s = latency_s if callable(latency_s) else float(latency_s)
        self.model_name = model_name
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.script_errors: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._script_lock = threading.Lock()
        self._httpd = _Server((host, port), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None
        self._counter = 0
        self.stopped = False

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ScriptedServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port (requests still sleeping are abandoned)."""
        self.stopped = True
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- request handling (called from handler threads) -----------------------------------
    def _enter(self, req: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(req)
            self.headers.append(headers)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _answer(self, req: dict[str, Any], *, chat: bool) -> tuple[int, bytes | Reply, dict[str, str]]:
        n = max(1, int(req.get("n") or 1))
        replies = []
        for i in range(n):
            with self._script_lock:  # scripts may keep state (counters, RNG)
                try:
                    replies.append(_as_reply(self.script({**req, "_choice": i})))
                except Exception as exc:  # a broken script is a visible 500, not a dropped socket
                    self.script_errors.append(f"{type(exc).__name__}: {exc}")
                    body = {"error": {"message": f"script raised {type(exc).__name__}: {exc}", "type": "script_error"}}
                    return 500, json.dumps(body).encode(), {}
        base = self.latency_s(req) if callable(self.latency_s) else self.latency_s
        delay = float(base) + max(r.delay_s for r in replies)
        if delay > 0:
            time.sleep(delay)
        first = replies[0]
        if first.stream is not None:
            return first.status, first, first.headers
        if first.raw is not None:
            return first.status, first.raw, first.headers
        if first.status != 200:
            body = {"error": {"message": f"scripted HTTP {first.status}", "type": "server_error"}}
            return first.status, json.dumps(body).encode(), first.headers
        with self._lock:
            self._counter += 1
            cid = f"chatcmpl-scripted-{self._counter}"
        prompt_text = json.dumps(req.get("messages") if chat else req.get("prompt"))
        choices, completion_tokens = [], 0
        for i, r in enumerate(replies):
            toks = _tokens(r.text)
            completion_tokens += len(toks)
            choice: dict[str, Any] = {"index": i, "finish_reason": r.finish_reason}
            if chat:
                choice["message"] = {"role": "assistant", "content": r.text}
            else:
                choice["text"] = r.text
            if req.get("logprobs") and chat:
                choice["logprobs"] = {"content": [{"token": t, "logprob": -0.25, "top_logprobs": []} for t in toks]}
            elif req.get("logprobs"):
                choice["logprobs"] = {"tokens": toks, "token_logprobs": [-0.25] * len(toks)}
            choices.append(choice)
        body = {
            "id": cid,
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": req.get("model") or self.model_name,
            "choices": choices,
            "usage": {
                "prompt_tokens": len(_tokens(prompt_text)),
                "completion_tokens": completion_tokens,
                "total_tokens": len(_tokens(prompt_text)) + completion_tokens,
            },
        }
        return 200, json.dumps(body, ensure_ascii=False).encode("utf-8"), first.headers


def main(argv: list[str] | None = None) -> int:
    """Serve a built-in script until killed; prints ``URL <base url>`` on the first line."""
    from qdevolve.testing.scripts import make_script

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--script", default="evolve",
                   help="built-in script: evolve, mixed, garbage:<mode>, hostile or hostile:<mode>")
    p.add_argument("--latency", type=float, default=0.0, help="seconds per reply")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout-delay", type=float, default=30.0, help="seconds 'timeout' replies stall")
    args = p.parse_args(argv)
    script = make_script(args.script, seed=args.seed, timeout_delay_s=args.timeout_delay)
    server = ScriptedServer(script, latency_s=args.latency, port=args.port)
    print(f"URL {server.url}", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
    return 0


if __name__ == "__main__":
    # Run the imported module's main: scripts build ``qdevolve.testing.scripted_server.Reply``
    # objects, which are not instances of this ``__main__`` module's ``Reply`` class.
    from qdevolve.testing.scripted_server import main as _main

    sys.exit(_main())
