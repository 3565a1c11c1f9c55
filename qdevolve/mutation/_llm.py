"""What the LLM operators share: ask the backend, turn each reply into a :class:`Candidate`.

:class:`LLMMutation` builds the prompt (:func:`qdevolve.prompts.build_prompt`), sends one
:class:`GenerationRequest` with ``n = context.n`` and parses every completion with the
subclass's :meth:`LLMMutation.parse`. Nothing the model or the server does raises: a failed
request, an empty or oversized reply, a reply that does not parse, edits outside the
EVOLVE-BLOCK regions, a block that changes the meaning of the fixed code outside it
(:mod:`qdevolve.mutation.fixed_code`), a child longer than ``settings["max_code_length"]``
or a child that is not valid Python all become a candidate with ``code=None``, the reason in
``error`` and the reply in ``raw``. The reply of a failed candidate is kept only up to
``max_failed_reply_chars`` (in ``raw`` and in the completion text the engine stores), so a
runaway model cannot fill the database. The one exception that passes through is
:class:`qdevolve.errors.RunAborted` (the model server is unreachable): the run must stop.

Parsing is bounded three ways, because a reply is an adversary: replies over
``max_reply_chars`` are refused before parsing; every reply parser scans its text in time
linear in it (line-scanning state machines and ``str.find``, no regular expression that can
backtrack across the reply); and each reply is parsed in a daemon worker thread, off the event loop,
against a deadline of ``parse_timeout_s`` (:func:`parse_off_loop`): the loop keeps running (so
``--max-wall-time`` holds) and a reply whose parse outlives the deadline is a failed candidate.
Long steps inside a parse (applying many SEARCH/REPLACE blocks) call :func:`check_deadline`,
so an abandoned parse also stops soon.
"""

from __future__ import annotations

import ast
import asyncio
import contextvars
import dataclasses
import os
import queue
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from qdevolve.backends.base import Completion, GenerationRequest
from qdevolve.backends.coalesce import settle
from qdevolve.errors import RunAborted
from qdevolve.mutation.base import Candidate, MutationContext
from qdevolve.mutation.fixed_code import fixed_code_violation
from qdevolve.programtree import is_tree
from qdevolve.prompts import build_prompt, prompt_hash
from qdevolve.textsafe import strip_surrogates, terminal_safe_line
from qdevolve.types import Program, new_id

__all__ = ["LLMMutation", "ParseError", "extract_code_blocks", "check_syntax", "check_deadline", "parse_off_loop",
           "ParseTimeout"]

T = TypeVar("T")
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("qdevolve_parse_deadline", default=None)

_FENCE_LANG = re.compile(r"[ \t]*([\w+.#-]*)")  # matched once at one offset: no backtracking across the line


class ParseError(Exception):
    """The reply cannot be turned into a child; the message is the stored reason."""


class ParseTimeout(ParseError):
    """Parsing a reply outlived its deadline (``parse_timeout_s``)."""


def check_deadline(what: str) -> None:
    """Raise :class:`ParseTimeout` when the current parse's deadline has passed (no-op outside one)."""
    deadline = _DEADLINE.get()
    if deadline is not None and time.monotonic() > deadline:
        raise ParseTimeout(f"parsing the reply passed its deadline while {what}")


class _ParseWorkers:
    """Daemon threads that run parse jobs, kept between replies.

    Starting a thread per reply costs the event loop a wait (``Thread.start`` blocks until the
    new thread runs: milliseconds per child on a loaded machine, measured in the LLM-loop
    benchmark). Here a job goes to an idle worker when there is one, else to a new worker; a
    worker whose job outlives its deadline stays busy with it (abandoned, as before) while the
    next replies are served by the others. A worker idle for ``idle_s`` retires.

    ``_idle`` counts the workers waiting for a job that no submitter has claimed yet: a submit
    claims one (or starts a worker), so every queued job has a worker on its way to it.
    """

    def __init__(self, idle_s: float = 30.0) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], Callable[[], None] | None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._idle_s = idle_s

    def submit(self, job: Callable[[], Callable[[], None] | None]) -> None:
        """Run ``job`` (which must not raise) in a worker thread; then, once the worker counts as
        idle again, the callable ``job`` returned (delivering the result), so a caller woken by
        that delivery finds this worker idle for its next job instead of starting another."""
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1
        self._jobs.put(job)
        if start:
            threading.Thread(target=self._serve, name="qdevolve-parse", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self._idle_s)
            except queue.Empty:
                with self._lock:
                    if self._idle:  # an unclaimed idle place: this worker retires
                        self._idle -= 1
                        return
                continue  # every idle place is claimed: a job is on its way
            deliver = contextvars.Context().run(job)  # a fresh context per job, as a fresh thread had
            del job  # the reply and its future are not kept while this worker waits
            with self._lock:
                self._idle += 1
            if deliver is not None:
                deliver()
                del deliver


_WORKERS = _ParseWorkers()


def _fresh_workers_after_fork() -> None:
    """A forked child has none of the parent's worker threads: it must not count them as idle."""
    global _WORKERS
    _WORKERS = _ParseWorkers()


os.register_at_fork(after_in_child=_fresh_workers_after_fork)


async def parse_off_loop(fn: Callable[[], T], timeout_s: float) -> T:
    """``fn()`` run in a daemon worker thread with :func:`check_deadline` armed at ``timeout_s``.

    The event loop keeps running meanwhile (the engine's wall time, other requests); after
    ``timeout_s`` this raises :class:`ParseTimeout` and the worker is abandoned to its parse (a
    daemon: it never holds up the process's exit, and its next :func:`check_deadline` ends the
    parse, after which it serves later replies). Workers are reused (:class:`_ParseWorkers`).
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def work() -> Callable[[], None]:
        token = _DEADLINE.set(time.monotonic() + timeout_s)
        value: Any = None
        error: BaseException | None = None
        try:
            value = fn()
        except BaseException as exc:  # handed to the awaiting task, which decides
            error = exc
        finally:
            _DEADLINE.reset(token)

        def deliver() -> None:
            try:
                loop.call_soon_threadsafe(settle, future, value, error)
            except RuntimeError:  # the loop closed while we parsed: nobody waits for the result
                pass

        return deliver

    _WORKERS.submit(work)
    try:
        return await asyncio.wait_for(future, timeout_s)
    except asyncio.TimeoutError:
        raise ParseTimeout(f"parsing the reply took longer than parse_timeout_s={timeout_s:g} s") from None


def extract_code_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, code)`` of every fenced block; an unclosed final fence runs to the end.

    A fence opens at a triple backtick followed by a newline later in the text: the word after
    the backticks (after blanks) is the language, the rest of that line is ignored, the code
    runs to the next triple backtick (or the end). One left-to-right scan with ``str.find``:
    time linear in the text, whatever it holds.
    """
    out: list[tuple[str, str]] = []
    pos = 0
    while (opening := text.find("```", pos)) >= 0:
        newline = text.find("\n", opening + 3)
        if newline < 0:  # no line break after this fence, nor after any later one
            break
        lang = _FENCE_LANG.match(text, opening + 3, newline)
        closing = text.find("```", newline + 1)
        end = len(text) if closing < 0 else closing
        out.append(((lang.group(1) if lang else "").lower(), text[newline + 1:end]))
        if closing < 0:
            break
        pos = closing + 3
    return out


def check_syntax(code: str, language: str) -> None:
    """Raise :class:`ParseError` with the SyntaxError when Python ``code`` does not parse."""
    if language != "python":
        return
    try:
        ast.parse(code)
    except SyntaxError as exc:
        raise ParseError(f"child does not parse: SyntaxError: {exc.msg} (line {exc.lineno})") from None
    except ValueError as exc:  # e.g. NUL bytes
        raise ParseError(f"child does not parse: {exc}") from None


class LLMMutation:
    """Base of ``diff``, ``rewrite`` and ``crossover``.

    Args:
        temperature, top_p, max_tokens: Sampling settings for the request (``None``: the
            request defaults; a backend's own settings may override them).
        max_reply_chars: Longer replies are failed candidates (a runaway model).
        max_failed_reply_chars: A failed candidate keeps this much of its reply.
        parse_timeout_s: Deadline for parsing one reply (off the event loop); past it the
            candidate fails with the reason.
        settings: Prompt settings merged under ``context.settings``.
    """

    name = "llm"
    edit_format = "diff"
    n_parents = 1
    needs_backend = True

    def __init__(
        self,
        *,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        max_reply_chars: int = 200_000,
        max_failed_reply_chars: int = 20_000,
        parse_timeout_s: float = 10.0,
        settings: dict[str, Any] | None = None,
    ) -> None:
        if not parse_timeout_s > 0:
            raise ValueError(f"parse_timeout_s must be > 0, got {parse_timeout_s}")
        self.parse_timeout_s = float(parse_timeout_s)
        if max_reply_chars <= 0:
            raise ValueError(f"max_reply_chars must be > 0, got {max_reply_chars}")
        if max_failed_reply_chars < 0:
            raise ValueError(f"max_failed_reply_chars must be >= 0, got {max_failed_reply_chars}")
        self.max_failed_reply_chars = max_failed_reply_chars
        self.temperature, self.top_p, self.max_tokens = temperature, top_p, max_tokens
        self.max_reply_chars = max_reply_chars
        self.settings = dict(settings or {})

    # -- to implement --------------------------------------------------------------------
    def parse(self, reply: str, parent: Program, others: list[Program]) -> tuple[str, dict[str, Any]]:
        """The child's full code and metadata from ``reply``; raise :class:`ParseError`."""
        raise NotImplementedError

    # -- shared --------------------------------------------------------------------------
    def parent_ids(self, parent: Program, others: list[Program]) -> tuple[str, ...]:
        return (parent.id,)

    def messages(self, parent: Program, context: MutationContext) -> list[dict[str, str]]:
        settings = {**self.settings, **(context.settings or {})}
        return build_prompt(
            parent,
            context.parent_result,
            list(context.inspirations),
            edit_format=self.edit_format,  # type: ignore[arg-type]
            settings=settings,
            other_parents=list(context.other_parents) if self.n_parents > 1 else None,
        )

    def _failed(self, parent: Program, others: list[Program], reason: str, **kw: Any) -> Candidate:
        """A failed candidate; ``reason`` (which may quote model text) becomes one terminal-safe line."""
        reason = terminal_safe_line(strip_surrogates(reason))
        return Candidate(code=None, operator=self.name, parent_ids=self.parent_ids(parent, others), error=reason, **kw)

    async def propose(self, parent: Program, context: MutationContext, backend: Any) -> list[Candidate]:
        """``context.n`` candidates for ``parent`` from one prompt (one group id)."""
        n = max(1, int(context.n))
        others = [p for p, _ in context.other_parents[: self.n_parents - 1]]
        if len(others) < self.n_parents - 1:
            reason = f"{self.name} needs {self.n_parents} parents; context.other_parents has {len(others)}"
            return [self._failed(parent, others, reason) for _ in range(n)]
        messages = self.messages(parent, context)
        phash = prompt_hash(messages)
        req = GenerationRequest(
            messages=messages,
            n=n,
            seed=int(context.rng.integers(0, 2**31 - 1)),
            metadata={"parent_id": parent.id, "operator": self.name, "iteration": context.iteration},
        )
        for key in ("temperature", "top_p", "max_tokens"):
            if getattr(self, key) is not None:
                setattr(req, key, getattr(self, key))
        prompt_text = req.text()
        group = new_id()
        common: dict[str, Any] = {"prompt": prompt_text, "prompt_hash": phash, "group_id": group}
        limit = {**self.settings, **(context.settings or {})}.get("max_code_length")
        try:
            results = await backend.generate([req])
            completions: list[Completion] = list(results[0]) if results else []
        except RunAborted:
            raise
        except Exception as exc:  # a backend that raises must not stop the run
            reason = f"backend error: {type(exc).__name__}: {exc}"
            return [self._failed(parent, others, reason, **common) for _ in range(n)]
        if not completions:
            return [self._failed(parent, others, "backend returned no completions", **common)]
        out = []
        for c in completions:
            try:
                out.append(await parse_off_loop(lambda c=c: self._candidate(parent, others, c, common, limit),
                                                self.parse_timeout_s))
            except ParseTimeout as exc:
                out.append(self._failed_reply(parent, others, str(exc), c, common,
                                              {"model": c.model, "finish_reason": c.finish_reason}))
            except Exception as exc:  # a parser bug on one reply fails that child only, prompt kept
                out.append(self._failed_reply(parent, others, f"parsing the reply raised {type(exc).__name__}: {exc}",
                                              c, common, {"model": c.model, "finish_reason": c.finish_reason}))
        return out

    def _failed_reply(self, parent: Program, others: list[Program], reason: str, comp: Completion,
                      common: dict[str, Any], meta: dict[str, Any]) -> Candidate:
        """A failed candidate whose stored reply is cut to ``max_failed_reply_chars``."""
        text = comp.text or ""
        if len(text) > self.max_failed_reply_chars:
            meta = {**meta, "reply_chars": len(text), "reply_truncated": True}
            text = text[: self.max_failed_reply_chars]
            comp = dataclasses.replace(comp, text=text)
        return self._failed(parent, others, reason, **common, completion=comp, raw=text, metadata=meta)

    def _candidate(self, parent: Program, others: list[Program], comp: Completion, common: dict[str, Any],
                   max_code_length: int | None = None) -> Candidate:
        text = comp.text or ""
        meta: dict[str, Any] = {"model": comp.model, "finish_reason": comp.finish_reason}
        kw = {**common, "completion": comp, "raw": text, "metadata": meta}

        def failed(reason: str) -> Candidate:
            return self._failed_reply(parent, others, reason, comp, common, meta)

        if comp.error:
            return failed(f"generation failed: {comp.error}")
        if not text.strip():
            return failed("empty reply")
        if len(text) > self.max_reply_chars:
            return failed(f"reply too long: {len(text)} characters > max_reply_chars={self.max_reply_chars}")
        try:
            if is_tree(parent.code):  # per file, each section checked as a one-file child
                from qdevolve.mutation.tree_edit import parse_tree_reply

                code, extra = parse_tree_reply(self.parse, text, parent, others)
            else:
                code, extra = self.parse(text, parent, others)
                if is_tree(code):
                    raise ParseError("the child of a one-file program reads as a program tree; a program "
                                     "keeps its form")
                check_syntax(code, parent.language)
            if parent.language == "python" and not is_tree(code):
                violation = fixed_code_violation(parent.code, code)
                if violation is not None:
                    raise ParseError(violation)
            if max_code_length and len(code) > int(max_code_length):
                raise ParseError(f"child is {len(code)} characters, over max_code_length={max_code_length}")
        except ParseError as exc:
            reason = str(exc)
            if comp.finish_reason == "length":
                reason += " (the reply was cut off at max_tokens)"
            return failed(reason)
        meta.update(extra)
        return Candidate(code=code, operator=self.name, parent_ids=self.parent_ids(parent, others), **kw)
