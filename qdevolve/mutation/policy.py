"""``policy``: the mutation operator of the joined loop, sampling from the trained policy.

The prompt is rendered from a template filled from the parent, so the policy conditions
on the program it mutates:

* ``{parent}``: the parent's EVOLVE-BLOCK in the form the policy writes a child, i.e.
  ``block_template`` read backwards (with ``EXPR = "{completion}"`` a parent block
  ``EXPR = "x+1"`` gives ``x+1``); the whole block when the template does not match;
* ``{parent_block}``: the EVOLVE-BLOCK text; ``{parent_code}``: the whole program;
* ``{tests}``: the parent's per-test pass bits, one character per test (``1`` for a
  result >= 0.5, else ``0``; empty when the evaluator reports no tests);
* ``{score}``, ``{metrics}`` (JSON), ``{artifacts}`` (``key: value`` lines);
  ``{artifact[NAME]}``: the parent's artifact ``NAME`` alone (e.g. a problem suite's
  examples, so one run's prompts differ per problem).

The backend samples ``context.n`` completions of that one prompt (one RL group: G children
of the same parent and prompt); each completion is cleaned (cut at the first stop string)
and rendered into the parent's EVOLVE-BLOCK through ``block_template`` (``{completion}``;
default: the completion is the block body). Every candidate carries the prompt, so every
stored rollout shows the parent it was conditioned on. A completion that yields an empty
or unparsable program is a failed candidate that keeps its rollout, so the trainer still
sees (and is penalised for) it.
"""

from __future__ import annotations

import ast
import hashlib
import json
from typing import Any

from qdevolve import registry
from qdevolve.backends.base import GenerationRequest
from qdevolve.mutation.base import Candidate, MutationContext
from qdevolve.mutation.blocks import block_texts, splice_blocks
from qdevolve.types import Program, new_id

__all__ = ["PolicyMutation"]

DEFAULT_PROMPT = "{parent_block}"


@registry.mutation("policy")
class PolicyMutation:
    """Sample children from the (trained) policy behind the shared backend.

    Args:
        prompt_template: Prompt text; placeholders ``{parent}``, ``{parent_block}``,
            ``{parent_code}``, ``{tests}``, ``{score}``, ``{metrics}``, ``{artifacts}``
            (see the module docstring).
        block_template: How a completion becomes the EVOLVE-BLOCK body (``{completion}``).
        temperature, top_p, max_tokens: Sampling settings.
        stop: Completion is cut at the first of these strings (default: newline).
        strip: Strip whitespace around the completion.
    """

    n_parents = 1
    needs_backend = True

    def __init__(self, *, prompt_template: str = DEFAULT_PROMPT, block_template: str = "{completion}\n",
                 temperature: float = 1.0, top_p: float = 1.0, max_tokens: int = 64,
                 stop: list[str] | None = None, strip: bool = True) -> None:
        self.prompt_template = prompt_template
        self.block_template = block_template
        self.temperature, self.top_p, self.max_tokens = float(temperature), float(top_p), int(max_tokens)
        self.stop = ["\n"] if stop is None else list(stop)
        self.strip = strip
        if "{completion}" not in block_template:
            raise ValueError(f"block_template must contain '{{completion}}', got {block_template!r}")
        before, after = block_template.split("{completion}", 1)
        self._before, self._after = before.strip(), after.strip()

    def parent_text(self, block: str) -> str:
        """The parent's block as the policy would have written it (``block_template`` inverted)."""
        # two str.find calls (linear in the block), not a lazy regex that rescans per start
        i = block.find(self._before)
        j = -1 if i < 0 else block.find(self._after, i + len(self._before))
        text = block[i + len(self._before):j] if j >= 0 else block
        return text.strip() if self.strip else text

    def render_prompt(self, parent: Program, context: MutationContext) -> str:
        res = context.parent_result
        blocks = block_texts(parent.code)
        block = blocks[0] if blocks else parent.code
        tests = "" if res is None or not res.tests else "".join("1" if t >= 0.5 else "0" for t in res.tests)
        return self.prompt_template.format(
            parent=self.parent_text(block), parent_code=parent.code, parent_block=block, tests=tests,
            score="" if res is None or res.score is None else f"{res.score:.6g}",
            metrics="" if res is None else json.dumps(res.metrics, sort_keys=True),
            artifacts="" if res is None else "\n".join(f"{k}: {v}" for k, v in res.artifacts.items()),
            artifact={} if res is None else dict(res.artifacts))

    def clean(self, text: str) -> str:
        cut = len(text)
        for s in self.stop:
            i = text.find(s)
            if i >= 0:
                cut = min(cut, i)
        text = text[:cut]
        return text.strip() if self.strip else text

    def child_code(self, parent: Program, completion: str) -> str:
        body = self.block_template.format(completion=completion)
        n_blocks = len(block_texts(parent.code))
        if n_blocks != 1:
            raise ValueError(f"the policy operator needs exactly one EVOLVE-BLOCK, the parent has {n_blocks}")
        return splice_blocks(parent.code, [body])

    async def propose(self, parent: Program, context: MutationContext, backend: Any) -> list[Candidate]:
        prompt = self.render_prompt(parent, context)
        phash = hashlib.sha256(prompt.encode()).hexdigest()[:16]
        seed = int(context.rng.integers(0, 2**31 - 1))
        req = GenerationRequest(prompt=prompt, n=context.n, temperature=self.temperature, top_p=self.top_p,
                                max_tokens=self.max_tokens, seed=seed, stop=None)
        (completions,) = await backend.generate([req])
        group_id = new_id()
        out = []
        for comp in completions:
            base = dict(operator="policy", parent_ids=(parent.id,), prompt=prompt, prompt_hash=phash,
                        completion=comp, group_id=group_id, raw=comp.text)
            if comp.error:
                out.append(Candidate(code=None, error=f"backend error: {comp.error}", **base))
                continue
            text = self.clean(comp.text)
            if not text:
                out.append(Candidate(code=None, error="empty completion", **base))
                continue
            try:
                code = self.child_code(parent, text)
                ast.parse(code)
            except (ValueError, SyntaxError) as exc:
                out.append(Candidate(code=None, error=f"completion does not give a valid program: {exc}", **base))
                continue
            out.append(Candidate(code=code, metadata={"completion": text}, **base))
        return out
