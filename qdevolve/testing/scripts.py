"""Built-in scripts for :class:`~qdevolve.testing.scripted_server.ScriptedServer`.

:class:`ScriptedModel` plays a competent but unimaginative model: it reads the current
program from the prompt (the fenced block after a "Current program" heading, as in both
qdevolve's and OpenEvolve's templates; for crossover also the one after "Second parent"),
finds the requested edit format (SEARCH/REPLACE instructions -> a diff, a "Second parent"
heading -> a crossover, else a full rewrite) and perturbs numeric constants inside the
EVOLVE-BLOCK regions: floats by a relative Gaussian step, small integers by one. On the circle-packing example the constants are circle
positions and ring radii, so some children score higher and most stay valid, which is what
an end-to-end run needs. It is deterministic given its seed and call order.

:class:`GarbageScript` returns one kind of bad reply (see :data:`GARBAGE_MODES`), and
:class:`FailFirst` / :class:`Cycle` compose scripts.
"""

from __future__ import annotations

import ast
import json
import random
import re
from collections.abc import Callable
from typing import Any

from qdevolve.mutation.blocks import END, START, find_blocks
from qdevolve.testing.scripted_server import Reply

__all__ = [
    "GARBAGE_MODES",
    "ScriptedModel",
    "GarbageScript",
    "FailFirst",
    "Cycle",
    "make_script",
    "prompt_of",
    "program_after",
]

GARBAGE_MODES: tuple[str, ...] = (
    "no_code",
    "malformed_diff",
    "outside_markers",
    "empty",
    "huge",
    "invalid_utf8",
    "syntax_error",
    "http_500",
    "timeout",
)

_FENCE = re.compile(r"```[ \t]*[\w+.-]*[ \t]*\n(.*?)```", re.DOTALL)
_NUMBER = re.compile(r"(?<![\w.])(\d+\.\d*|\.\d+|\d+)(?![\w.])")


def prompt_of(req: dict[str, Any]) -> str:
    """The text of a chat or completion request (all user messages joined)."""
    if req.get("messages"):
        return "\n\n".join(str(m.get("content", "")) for m in req["messages"] if m.get("role") != "system")
    return str(req.get("prompt") or "")


def program_after(text: str, heading: str) -> str | None:
    """The first fenced code block after a Markdown heading line ``# <heading>`` (any case)."""
    m = re.search(rf"(?im)^#+[ \t]*{heading}[ \t]*:?[ \t]*$", text)
    if m is None:
        return None
    f = _FENCE.search(text, m.end())
    return f.group(1) if f else None


def _current_program(text: str) -> str | None:
    code = program_after(text, r"current\s+program")
    if code is not None:
        return code
    blocks = [b for b in _FENCE.findall(text) if START in b] or _FENCE.findall(text)
    return blocks[-1] if blocks else None


def _block_line_numbers(code: str) -> list[int]:
    """0-based numbers of the lines inside EVOLVE-BLOCK regions."""
    out = []
    for b in find_blocks(code):
        first = code.count("\n", 0, b.start)
        last = code.count("\n", 0, b.end)
        out.extend(range(first, last))
    return out


def _perturb_line(line: str, rng: random.Random) -> str | None:
    """``line`` with one numeric literal changed, or None when it has none worth changing."""
    code_part = line.split("#", 1)[0]
    nums = [m for m in _NUMBER.finditer(code_part)]
    floats = [m for m in nums if "." in m.group(1)]
    ints = [m for m in nums if "." not in m.group(1) and 2 <= int(m.group(1)) <= 1000]
    pool = floats or ints
    if not pool:
        return None
    m = rng.choice(pool)
    tok = m.group(1)
    if "." in tok:
        new = f"{float(tok) * (1.0 + rng.gauss(0.0, 0.08)):.4f}"
    else:
        new = str(int(tok) + rng.choice((-1, 1)))
    if new == tok:
        return None
    return line[: m.start(1)] + new + line[m.end(1):]


class ScriptedModel:
    """Valid diffs, rewrites and crossovers for any program with numeric constants.

    Args:
        seed: Seeds the perturbations.
        edits: Constants changed per reply.
        sloppy: Fraction of diff answers with a slip a careful reader still applies
            (indentation dropped, re-spaced SEARCH lines, a block or a whole program
            instead of a diff); drawn from its own stream, so 0 changes nothing.
    """

    def __init__(self, seed: int = 0, edits: int = 1, sloppy: float = 0.0) -> None:
        if not 0.0 <= sloppy <= 1.0:
            raise ValueError(f"sloppy must be in [0, 1], got {sloppy}")
        self.rng = random.Random(seed)
        self.edits = edits
        self.sloppy = sloppy
        self._sloppy_rng = random.Random(seed + 7919)  # its own stream: sloppy=0 changes nothing
        self.calls = 0

    def _mutate(self, code: str) -> tuple[str, list[tuple[str, str]]]:
        """``code`` with up to ``edits`` lines perturbed, and the (old, new) line pairs."""
        lines = code.split("\n")
        counts: dict[str, int] = {}
        for ln in lines:
            counts[ln] = counts.get(ln, 0) + 1
        try:
            allowed = _block_line_numbers(code)
        except ValueError:
            allowed = list(range(len(lines)))
        cand = [i for i in allowed if i < len(lines) and counts[lines[i]] == 1 and lines[i].strip()
                and not lines[i].lstrip().startswith("#") and _NUMBER.search(lines[i].split("#", 1)[0])]
        self.rng.shuffle(cand)
        pairs: list[tuple[str, str]] = []
        for i in cand:
            if len(pairs) >= self.edits:
                break
            new = _perturb_line(lines[i], self.rng)
            if new is not None:
                pairs.append((lines[i], new))
                lines[i] = new
        return "\n".join(lines), pairs

    def __call__(self, req: dict[str, Any]) -> str:
        self.calls += 1
        text = prompt_of(req)
        code = _current_program(text)
        if code is None:
            return "I could not find the program in your message."
        other = program_after(text, r"second\s+parent")
        if other is not None and "<<<<<<< SEARCH" not in text:
            return self._crossover(code, other)
        if "<<<<<<< SEARCH" in text:
            _, pairs = self._mutate(code)
            if not pairs:
                return "The program has no constants I would change."
            if self.sloppy and self._sloppy_rng.random() < self.sloppy:
                return self._sloppy_diff(code, pairs)
            blocks = "\n\n".join(f"<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE" for old, new in pairs)
            return f"Tuning a constant should help.\n\n{blocks}\n"
        child, _ = self._mutate(code)
        return f"Here is the improved program.\n\n```python\n{child.rstrip()}\n```\n"

    def _sloppy_diff(self, code: str, pairs: list[tuple[str, str]]) -> str:
        """A diff answer with one of the slips real models make (a careful reader still applies it).

        ``indent``: SEARCH/REPLACE lines without their indentation; ``spacing``: SEARCH lines
        re-spaced around operators; ``block``: the edited EVOLVE-BLOCK body in a fence instead
        of a diff; ``program``: the whole edited program in a fence instead of a diff.
        """
        kind = self._sloppy_rng.choice(("indent", "spacing", "block", "program"))
        child = code
        for old, new in pairs:
            child = child.replace(old, new, 1)
        if kind == "program":
            return f"Here is the whole program.\n\n```python\n{child.rstrip()}\n```\n"
        if kind == "block":
            blocks = find_blocks(child)
            if len(blocks) == 1:
                body = child[blocks[0].start:blocks[0].end]
                return f"The updated function:\n\n```python\n{body.rstrip()}\n```\n"
        if kind == "indent":
            pairs = [(old.strip(), new.strip()) for old, new in pairs]
        else:  # spacing
            pairs = [(_respaced(old), new) for old, new in pairs]
        blocks_text = "\n\n".join(f"<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE" for old, new in pairs)
        return f"Tuning a constant should help.\n\n{blocks_text}\n"

    def _crossover(self, a: str, b: str | None) -> str:
        child = a
        if b is not None:
            try:
                ab, bb = find_blocks(a), find_blocks(b)
            except ValueError:
                ab, bb = [], []
            if len(ab) == len(bb) == 1:
                la = a[ab[0].start:ab[0].end].split("\n")
                lb = b[bb[0].start:bb[0].end].split("\n")
                if len(la) == len(lb) and len(la) > 2:
                    k = self.rng.randrange(1, len(la) - 1)
                    body = "\n".join(la[:k] + lb[k:])
                    mixed = a[:ab[0].start] + body + a[ab[0].end:]
                    try:
                        ast.parse(mixed)
                        child = mixed
                    except SyntaxError:
                        pass
        child, _ = self._mutate(child)
        return f"Combining both parents:\n\n```python\n{child.rstrip()}\n```\n"


def _skeleton_line(code: str) -> str | None:
    """A unique non-empty line outside the EVOLVE-BLOCK regions."""
    try:
        inside = set(_block_line_numbers(code))
    except ValueError:
        return None
    lines = code.split("\n")
    for i, ln in enumerate(lines):
        if i not in inside and ln.strip() and START not in ln and END not in ln and lines.count(ln) == 1:
            return ln
    return None


def _respaced(line: str) -> str:
    """``line`` with the spacing inside it changed (every space doubled, or one added)."""
    indent, body = line[: len(line) - len(line.lstrip())], line.strip()
    if " " in body:
        return indent + body.replace(" ", "  ")
    return indent + re.sub(r"([=(,])", r"\1 ", body, count=1)


class GarbageScript:
    """Replies of one bad kind.

    Args:
        mode: One of :data:`GARBAGE_MODES`.
        timeout_delay_s: How long ``timeout`` replies stall (set it above the client timeout).
        huge_chars: Size of ``huge`` replies (default 1 MB).
    """

    def __init__(self, mode: str, *, timeout_delay_s: float = 30.0, huge_chars: int = 1_000_000) -> None:
        if mode not in GARBAGE_MODES:
            raise ValueError(f"unknown garbage mode {mode!r}; modes are {', '.join(GARBAGE_MODES)}")
        self.mode = mode
        self.timeout_delay_s = timeout_delay_s
        self.huge_chars = huge_chars

    def __call__(self, req: dict[str, Any]) -> str | Reply:
        code = _current_program(prompt_of(req)) or "x = 1\n"
        lines = code.split("\n")
        try:
            inside = _block_line_numbers(code)
        except ValueError:
            inside = list(range(len(lines)))
        body_lines = [lines[i] for i in inside if i < len(lines) and lines[i].strip()
                      and START not in lines[i] and END not in lines[i] and lines.count(lines[i]) == 1]
        some_line = body_lines[len(body_lines) // 2] if body_lines else "x = 1"
        mode = self.mode
        if mode == "no_code":
            return "The program looks fine to me; maybe try tuning the radii a little."
        if mode == "malformed_diff":
            return f"<<<<<<< SEARCH\n{some_line}\n=======\n{some_line}  # tweaked\n"
        if mode == "outside_markers":
            line = _skeleton_line(code) or some_line
            return f"<<<<<<< SEARCH\n{line}\n=======\n{line}  # edited outside the block\n>>>>>>> REPLACE\n"
        if mode == "empty":
            return ""
        if mode == "huge":
            pad = "# padding line\n" * (self.huge_chars // 15 + 1)
            return f"```python\n{pad}```\n"
        if mode == "syntax_error":
            return f"<<<<<<< SEARCH\n{some_line}\n=======\n{some_line}\n    def (:\n>>>>>>> REPLACE\n"
        if mode == "invalid_utf8":
            text = f"<<<<<<< SEARCH\n{some_line}\n=======\n{some_line}  INVALID\n>>>>>>> REPLACE\n"
            body = {
                "id": "chatcmpl-garbage", "object": "chat.completion", "model": req.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
            raw = json.dumps(body).encode("utf-8").replace(b"INVALID", b"\xff\xfe\xc3(")
            return Reply(raw=raw)
        if mode == "http_500":
            return Reply(status=500)
        return Reply(text="too late", delay_s=self.timeout_delay_s)  # timeout


class FailFirst:
    """``k`` replies with HTTP ``status`` (e.g. 500, 429), then ``then``'s replies."""

    def __init__(self, k: int, then: Callable[[dict[str, Any]], str | Reply], status: int = 500) -> None:
        self.k, self.then, self.status = k, then, status
        self.failed = 0

    def __call__(self, req: dict[str, Any]) -> str | Reply:
        if self.failed < self.k:
            self.failed += 1
            return Reply(status=self.status)
        return self.then(req)


class Cycle:
    """Replies from ``scripts`` in turn (call ``i`` uses ``scripts[i % len(scripts)]``).

    With ``sticky`` (the default) a request repeated verbatim, as a client retry is, goes
    to the script that answered it first, so a retried HTTP 500 or timeout fails again and
    the failure reaches the caller instead of being hidden by the next script in the cycle.
    """

    def __init__(self, scripts: list[Callable[[dict[str, Any]], str | Reply]], *, sticky: bool = True) -> None:
        if not scripts:
            raise ValueError("Cycle needs at least one script")
        self.scripts = scripts
        self.sticky = sticky
        self.i = 0
        self._seen: dict[str, int] = {}

    def __call__(self, req: dict[str, Any]) -> str | Reply:
        key = json.dumps(req, sort_keys=True, default=str) if self.sticky else ""
        if key in self._seen:
            k = self._seen[key]
        else:
            k = self.i % len(self.scripts)
            self.i += 1
            if self.sticky:
                self._seen[key] = k
        return self.scripts[k](req)


def make_script(name: str, *, seed: int = 0, timeout_delay_s: float = 30.0) -> Callable[[dict[str, Any]], str | Reply]:
    """A built-in script by name: ``evolve``, ``sloppy[:<fraction>]``, ``garbage:<mode>``, ``mixed``,
    ``hostile:<mode>`` or ``hostile``.

    ``sloppy`` is :class:`ScriptedModel` with a fraction of its diff answers slipping as real
    models do (see :meth:`ScriptedModel._sloppy_diff`).

    ``mixed`` alternates a valid reply with each garbage mode in turn, so a run sees every
    kind of failure and still makes progress.
    """
    if name == "evolve":
        return ScriptedModel(seed=seed)
    if name.startswith("sloppy"):  # sloppy or sloppy:<fraction>, default 0.5
        fraction = float(name.split(":", 1)[1]) if ":" in name else 0.5
        return ScriptedModel(seed=seed, sloppy=fraction)
    if name.startswith("garbage:"):
        return GarbageScript(name.split(":", 1)[1], timeout_delay_s=timeout_delay_s)
    if name.startswith("hostile"):
        from qdevolve.testing.hostile import HOSTILE_MODES, HostileScript

        model = ScriptedModel(seed=seed)
        if name == "hostile":  # every hostile mode in turn
            return Cycle([HostileScript(m, valid=model) for m in HOSTILE_MODES])
        if name.startswith("hostile:"):
            return HostileScript(name.split(":", 1)[1], valid=model)
    if name == "mixed":
        model = ScriptedModel(seed=seed)
        seq: list[Callable[[dict[str, Any]], str | Reply]] = []
        for mode in GARBAGE_MODES:
            seq += [model, GarbageScript(mode, timeout_delay_s=timeout_delay_s)]
        return Cycle(seq)
    raise ValueError(f"unknown script {name!r}; use evolve, sloppy[:<fraction>], mixed, hostile, hostile:<mode> or "
                     f"garbage:<{'|'.join(GARBAGE_MODES)}>")
