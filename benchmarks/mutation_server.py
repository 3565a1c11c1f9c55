"""A neutral mutation "model" for comparing evolutionary search frameworks (benchmark only).

An OpenAI-compatible HTTP server on 127.0.0.1 (``POST /v1/chat/completions``, also without
the ``/v1`` prefix; ``GET /v1/models``). It is not a language model and it does not read the
prompt beyond one thing: **the parent program**, taken as the first fenced code block after
the last line of the prompt that is a "current program" heading (``# Current program`` /
``# Current Program``, any case; this is how OpenEvolve's, ShinkaEvolve's and qdevolve's
default prompts show the program to improve). Everything else in the request is ignored:
the system message, metrics, feedback, inspiration and top programs, instructions, the
temperature and every sampling parameter. So a framework gains nothing from its prompt
construction here; what differs between frameworks is only which parents they send, how
many, and what they keep: their search.

For each request the server applies a seeded stochastic edit to the code inside the
parent's ``EVOLVE-BLOCK-START`` / ``EVOLVE-BLOCK-END`` markers (the whole program when it
has none) and replies with the **whole** program in one fenced block, wrapped in
``<NAME>``/``<DESCRIPTION>``/``<CODE>`` tags (ShinkaEvolve's full-rewrite format; OpenEvolve
and qdevolve take the fenced block). An edit is 1-3 steps, each drawn as:

* a numeric perturbation (weight 3): 1-2 numeric literals of the region, a float scaled by
  ``exp(N(0, 0.15^2))`` or moved by ``N(0, (0.05 * max(|v|, 0.1))^2)`` (even odds), an
  integer moved by +-1 or +-2 (0 stays >= 0 only by chance);
* a statement edit (weight 1): delete a simple statement (assignment, augmented
  assignment, expression call) from a block that keeps another statement, duplicate one,
  or swap two adjacent simple statements of the same block.

An edit is kept when the program compiles and differs from the parent; otherwise another
is drawn (up to 30 times; then the parent comes back with only its call tag changed). The
reply's first line inside the region is a comment ``# bench_samples call N``: N is the
call's number (1, 2, ...), which lets the benchmark map every evaluated program to the
call that produced it; a parent's old tag is replaced. Randomness: call N uses
``random.Random(f"{seed}:{N}:{sha256(parent)}")``, so a server seed and the same sequence
of requests give the same replies.

Every request is appended to ``--log`` as one JSON line (call number, time, whether a
parent was found, the edit). Run: ``python benchmarks/mutation_server.py --seed S --log F``
prints ``READY http://127.0.0.1:PORT/v1`` once listening.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import math
import random
import re
import sys
import threading
import time
import tokenize
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

START, END = "EVOLVE-BLOCK-START", "EVOLVE-BLOCK-END"
TAG = re.compile(r"^[ \t]*# bench_samples call \d+[ \t]*\n", re.M)
_HEADING = re.compile(r"^\s*#+\s*current program\s*:?\s*$", re.I | re.M)
_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n(.*?)\n?```", re.S)
_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)


def find_parent(prompt: str) -> str | None:
    """The first fenced block after the last "current program" heading, or None."""
    heads = list(_HEADING.finditer(prompt))
    if not heads:
        return None
    m = _FENCE.search(prompt, heads[-1].end())
    return None if m is None else m.group(1) + "\n"


def _region(code: str) -> tuple[int, int]:
    """Line indices [first, last) of the first EVOLVE-BLOCK's body (the whole file without one)."""
    lines = code.splitlines(keepends=True)
    s = next((i for i, ln in enumerate(lines) if START in ln), None)
    e = next((i for i, ln in enumerate(lines) if END in ln and s is not None and i > s), None)
    return (0, len(lines)) if s is None or e is None else (s + 1, e)


def _numbers(lines: list[str], lo: int, hi: int) -> list[tuple[int, int, int, str]]:
    """(line, col_start, col_end, text) of the numeric literals on lines [lo, hi)."""
    out = []
    try:
        toks = list(tokenize.generate_tokens(io.StringIO("".join(lines)).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return out
    for t in toks:
        if t.type == tokenize.NUMBER and lo <= t.start[0] - 1 < hi and t.start[0] == t.end[0]:
            if not any(c in t.string.lower() for c in "jx_"):  # no complex, hex or grouped literals
                out.append((t.start[0] - 1, t.start[1], t.end[1], t.string))
    return out


def _perturb(text: str, rng: random.Random) -> str:
    if re.fullmatch(r"\d+", text):
        v = int(text) + rng.choice((-2, -1, 1, 2))
    else:
        x = float(text)
        if rng.random() < 0.5:
            x *= math.exp(rng.gauss(0.0, 0.15))
        else:
            x += rng.gauss(0.0, 0.05 * max(abs(x), 0.1))
        v = float(f"{x:.6g}")
        if v == float(text):
            v = float(text) + 1e-3
        text_v = repr(v)
        return f"({text_v})" if v < 0 else text_v
    return f"({v})" if v < 0 else str(v)


def _numeric_step(lines: list[str], lo: int, hi: int, rng: random.Random) -> str:
    nums = _numbers(lines, lo, hi)
    if not nums:
        return ""
    picks = rng.sample(nums, k=min(len(nums), rng.choice((1, 1, 2))))
    for li, c0, c1, text in sorted(picks, key=lambda p: (p[0], -p[1])):  # right to left on a line
        lines[li] = lines[li][:c0] + _perturb(text, rng) + lines[li][c1:]
    return f"number x{len(picks)}"


def _bodies(tree: ast.AST) -> list[list[ast.stmt]]:
    out = []
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                out.append(body)
    return out


def _is_simple(s: ast.stmt) -> bool:
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
        return False  # a docstring or a bare constant
    return isinstance(s, _SIMPLE)


def _statement_step(lines: list[str], lo: int, hi: int, rng: random.Random) -> str:
    try:
        tree = ast.parse("".join(lines))
    except SyntaxError:
        return ""
    inside = lambda s: lo <= s.lineno - 1 and s.end_lineno - 1 < hi  # noqa: E731
    options = []
    for body in _bodies(tree):
        for i, s in enumerate(body):
            if not (_is_simple(s) and inside(s)):
                continue
            options.append(("duplicate", s, None))
            if len(body) > 1:
                options.append(("delete", s, None))
            if i + 1 < len(body) and _is_simple(body[i + 1]) and inside(body[i + 1]):
                options.append(("swap", s, body[i + 1]))
    if not options:
        return ""
    kind, a, b = rng.choice(options)
    a0, a1 = a.lineno - 1, a.end_lineno
    if kind == "delete":
        del lines[a0:a1]
    elif kind == "duplicate":
        lines[a1:a1] = lines[a0:a1]
    else:
        b0, b1 = b.lineno - 1, b.end_lineno
        lines[a0:b1] = lines[b0:b1] + lines[a1:b0] + lines[a0:a1]
    return kind


def mutate(parent: str, call: int, seed: int) -> tuple[str, str]:
    """(child program, description of the edit) for call ``call`` of a server seeded ``seed``."""
    base = TAG.sub("", parent)
    rng = random.Random(f"{seed}:{call}:{hashlib.sha256(base.encode()).hexdigest()}")
    child, what = base, "none (no edit compiled)"
    for _ in range(30):
        lines = base.splitlines(keepends=True)
        steps = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            lo, hi = _region("".join(lines))
            step = (_numeric_step if rng.random() < 0.75 else _statement_step)(lines, lo, hi, rng)
            steps.append(step or _numeric_step(lines, lo, hi, rng))
        code = "".join(lines)
        if code != base and any(steps):
            try:
                compile(code, "<child>", "exec")
            except (SyntaxError, ValueError):
                continue
            child, what = code, ", ".join(s for s in steps if s)
            break
    lines = child.splitlines(keepends=True)
    lo, _ = _region(child)
    indent = re.match(r"[ \t]*", lines[lo]).group(0) if lo < len(lines) and lines[lo].strip() else ""
    lines.insert(lo, f"{indent}# bench_samples call {call}\n")
    return "".join(lines), what


def reply_text(child: str, call: int, what: str) -> str:
    return (f"<NAME>\nmutation_{call}\n</NAME>\n\n<DESCRIPTION>\nSeeded edit: {what}.\n</DESCRIPTION>\n\n"
            f"<CODE>\n```python\n{child}```\n</CODE>\n")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr, seed: int, log: Path | None) -> None:
        super().__init__(addr, _Handler)
        self.seed, self.log, self.calls, self.lock = seed, log, 0, threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "mutation-server", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0") or 0)) or b"{}")
        except ValueError:
            self._send(400, {"error": {"message": "body is not JSON"}})
            return
        prompt = "\n".join(str(m.get("content", "")) for m in req.get("messages", []) if isinstance(m, dict))
        with self.server.lock:
            self.server.calls += 1
            call = self.server.calls
        parent = find_parent(prompt)
        if parent is None:
            child, what, text = None, "no parent found", "No '# Current program' block in the prompt."
        else:
            child, what = mutate(parent, call, self.server.seed)
            text = reply_text(child, call, what)
        if self.server.log is not None:
            with self.server.lock, self.server.log.open("a") as f:
                f.write(json.dumps({"call": call, "t": time.time(), "parent": parent is not None, "edit": what}) + "\n")
        n_prompt, n_out = max(1, len(prompt) // 4), max(1, len(text) // 4)
        self._send(200, {"id": f"mut-{call}", "object": "chat.completion", "created": int(time.time()),
                         "model": req.get("model", "mutation-server"),
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_out,
                                   "total_tokens": n_prompt + n_out}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log", type=Path)
    args = ap.parse_args()
    server = _Server(("127.0.0.1", args.port), args.seed, args.log)
    print(f"READY http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    sys.exit(0)


if __name__ == "__main__":
    main()
