"""LLM-judge clusterer: a model names each completion's strategy (``llm_judge``).

Kind ``cluster``. Rewarding the Rare (Hu et al. 2026, arXiv 2601.08763) clusters a group's
rollouts by asking an LLM judge for their high-level solution strategy, ignoring surface
variation. Here the judge is any generation backend (the ``qdevolve.backends.base``
contract: ``async generate(requests) -> list[list[Completion]]``), given as an object or as a
backend spec ``{"type": "openai", ...}`` created through ``qdevolve.registry.backend``.

The prompt shows the completion (and ``problem`` / ``metadata["problem"]`` when known) and
the strategy names already in use, asking the judge to reuse one when it fits, so names stay
consistent across groups. The reply's first line is normalised (lower case, punctuation
dropped, whitespace collapsed, at most ``max_words`` words) into a key ``judge:<name>``.
Replies are cached per completion text, so each distinct text costs one request. A failed
request raises ``ValueError`` naming the backend's error; an empty reply gives
``judge:unknown``.

Calling the clusterer is synchronous (it runs the request on a private event loop, in a
worker thread when an event loop is already running); inside async code ``await
judge.acall(item)`` instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import re
from collections.abc import Mapping
from typing import Any

from qdevolve import registry
from qdevolve.backends.base import GenerationRequest
from qdevolve.cluster import unpack

__all__ = ["LLMJudgeCluster", "JUDGE_PROMPT"]

JUDGE_PROMPT = """You classify solutions by their high-level strategy, ignoring naming, formatting \
and other surface details.
{problem}Solution:
{solution}

Strategy names already in use: {known}
Reply with one short strategy name (at most {max_words} words). Reuse a name from the list \
when the strategy is the same. Reply with the name only."""

_NON_WORD = re.compile(r"[^a-z0-9 ]+")


def normalize_name(reply: str, max_words: int) -> str:
    """Lower-cased first line of ``reply``, punctuation removed, at most ``max_words`` words."""
    line = next((ln for ln in reply.strip().splitlines() if ln.strip()), "")
    words = _NON_WORD.sub(" ", line.lower()).split()
    return " ".join(words[:max_words])


@registry.cluster("llm_judge")
class LLMJudgeCluster:
    """Strategy names from a judge model, cached per text (see module docstring)."""

    def __init__(
        self,
        *,
        backend: Any,
        problem: str | None = None,
        max_words: int = 5,
        max_known: int = 50,
        temperature: float = 0.0,
        max_tokens: int = 24,
    ) -> None:
        if isinstance(backend, (Mapping, str)):
            backend = registry.backend.create(
                dict(backend) if isinstance(backend, Mapping) else backend
            )
        if not hasattr(backend, "generate"):
            raise ValueError(
                f"llm_judge needs a backend with an async generate(); got {type(backend).__name__}"
            )
        self.backend = backend
        self.problem = problem
        self.max_words = int(max_words)
        self.max_known = int(max_known)
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self._cache: dict[str, str] = {}
        self._known: list[str] = []

    @property
    def known(self) -> list[str]:
        """Strategy names seen so far, in order of first appearance."""
        return list(self._known)

    def _request(self, text: str, problem: str | None) -> GenerationRequest:
        prompt = JUDGE_PROMPT.format(
            problem=f"Problem:\n{problem}\n\n" if problem else "",
            solution=text,
            known=", ".join(self._known[-self.max_known :]) or "(none yet)",
            max_words=self.max_words,
        )
        return GenerationRequest(
            messages=[{"role": "user", "content": prompt}],
            n=1,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            metadata={"purpose": "llm_judge"},
        )

    async def acall(self, item: Any) -> str:
        """The strategy key of ``item`` (awaitable form of ``__call__``)."""
        inp = unpack(item)
        text = str(inp.metadata.get("code") or inp.text)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if digest in self._cache:
            return self._cache[digest]
        problem = inp.metadata.get("problem") or self.problem
        results = await self.backend.generate([self._request(text, problem)])
        if not results or not results[0]:
            raise ValueError("llm_judge: the backend returned no completion for the judge request")
        completion = results[0][0]
        if getattr(completion, "error", None):
            raise ValueError(f"llm_judge: the judge request failed: {completion.error}")
        name = normalize_name(completion.text, self.max_words) or "unknown"
        if name not in self._known:
            self._known.append(name)
        key = f"judge:{name}"
        self._cache[digest] = key
        return key

    def __call__(self, item: Any) -> str:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.acall(item))
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, self.acall(item)).result()
