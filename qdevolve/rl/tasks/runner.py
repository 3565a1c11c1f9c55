"""Run the inner loop on a task: sample groups, train, and measure diversity.

* :func:`make_groups`: sample G completions per prompt with the current policy, verify them,
  and build :class:`~qdevolve.rl.group.RolloutGroup` objects carrying rewards, per-test
  vectors, outcome / cluster keys (chosen from the task's ``outcome``, ``semantic`` and
  ``strategy`` keys), candidate vectors, token ids and old log-probs.
* :func:`evaluate_policy`: per prompt, n sampled completions (correct count, distinct correct
  outcomes, per-test vectors) and, where the task's answer space is enumerable, the exact
  answer distribution; :func:`summarize` turns that into pass@k, D_n, answer entropy,
  support retained / lost / gained and prompts newly solved / lost against a base.
* :func:`train_on_task`: the loop used by ``qdevolve train`` and the benchmark: gradient
  objectives go through :class:`~qdevolve.rl.trainer.PolicyTrainer`, ``es`` through
  :meth:`ES.update` with a greedy-decoding reward.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from qdevolve.rl import metrics as M
from qdevolve.rl.group import RolloutGroup
from qdevolve.rl.sampling import answer_logprobs, encode_prompt, sample_batch
from qdevolve.rl.tasks.base import Task, Verdict

__all__ = ["KEYS", "make_groups", "PromptEval", "evaluate_policy", "summarize", "train_on_task", "greedy_reward"]

KEYS = ("outcome", "semantic", "strategy")


def _key(v: Verdict, which: str, i: int) -> str:
    k = getattr(v, which)
    return k if k is not None else f"<invalid:{i}>"


def make_groups(task: Task, model: Any, tokenizer: Any, prompts: Sequence[str], G: int, *,
                temperature: float = 1.0, generator: torch.Generator | None = None,
                outcome_key: str = "outcome", cluster_key: str = "strategy",
                step: int = 0, binary: bool = False) -> list[RolloutGroup]:
    """One scored :class:`RolloutGroup` per prompt (G samples each).

    ``binary`` uses correctness (0/1) as the reward instead of the task's scalar reward (for
    ``passk`` on graded tasks). Single-answer completions get ``candidate_vectors`` of one
    candidate (``[G, 1, T]``), so set-level objectives (VPO) run on any task.
    """
    if outcome_key not in KEYS or cluster_key not in KEYS:
        raise ValueError(f"outcome_key and cluster_key must be in {KEYS}")
    samples = sample_batch(model, tokenizer, prompts, G, task.max_new_tokens, temperature, generator)
    groups = []
    for j, (prompt, group) in enumerate(zip(prompts, samples, strict=True)):
        verdicts = [task.verify(prompt, text) for text, _, _ in group]
        if all(v.candidates is not None for v in verdicts):
            cands = np.stack([v.candidates for v in verdicts])
        else:
            cands = np.stack([v.tests for v in verdicts])[:, None, :]
        groups.append(RolloutGroup(
            rewards=np.array([float(v.correct) if binary else v.reward for v in verdicts]),
            reward_vectors=np.stack([v.tests for v in verdicts]),
            outcome_keys=[_key(v, outcome_key, i) for i, v in enumerate(verdicts)],
            cluster_keys=[_key(v, cluster_key, i) for i, v in enumerate(verdicts)],
            candidate_vectors=cands,
            token_ids=[ids for _, ids, _ in group],
            old_logprobs=[lp for _, _, lp in group],
            prompt=prompt, prompt_id=f"s{step}-p{j}",
            metadata={"prompt_token_ids": encode_prompt(tokenizer, prompt),
                      "texts": [t for t, _, _ in group], "correct": [v.correct for v in verdicts]}))
    return groups


@dataclass
class PromptEval:
    """What :func:`evaluate_policy` measured on one prompt."""

    prompt: str
    n: int
    correct: int
    correct_outcomes: Counter = field(default_factory=Counter)
    correct_semantic: Counter = field(default_factory=Counter)
    vectors: np.ndarray | None = None
    probs: np.ndarray | None = None
    correct_mask: np.ndarray | None = None
    answers: tuple[str, ...] = ()

    @property
    def p_correct(self) -> float:
        if self.probs is not None and self.correct_mask is not None:
            return float(self.probs[self.correct_mask].sum())
        return self.correct / self.n


@torch.no_grad()
def evaluate_policy(task: Task, model: Any, tokenizer: Any, prompts: Sequence[str] | None = None, *,
                    n: int = 256, temperature: float = 1.0, seed: int = 0, exact: bool = True,
                    chunk: int = 8) -> list[PromptEval]:
    """Sample ``n`` completions per prompt (and score the answer space when enumerable).

    For multi-candidate completions (``Verdict.candidates``), ``vectors`` holds every
    candidate's test vector, so best@k counts candidate programs.
    """
    prompts = list(prompts if prompts is not None else task.prompts("train"))
    gen = torch.Generator().manual_seed(seed)
    out = []
    for s in range(0, len(prompts), chunk):
        batch = prompts[s:s + chunk]
        samples = sample_batch(model, tokenizer, batch, n, task.max_new_tokens, temperature, gen)
        for prompt, group in zip(batch, samples, strict=True):
            verdicts = [task.verify(prompt, text) for text, _, _ in group]
            ev = PromptEval(prompt=prompt, n=n, correct=sum(v.correct for v in verdicts))
            for v in verdicts:
                if v.correct:
                    ev.correct_outcomes[v.outcome] += 1
                    ev.correct_semantic[v.semantic] += 1
            if all(v.candidates is not None for v in verdicts):
                ev.vectors = np.concatenate([v.candidates for v in verdicts])
            else:
                ev.vectors = np.stack([v.tests for v in verdicts])
            space = task.answer_space(prompt) if exact else None
            if space is not None:
                ev.answers = tuple(space)
                ev.probs = answer_logprobs(model, tokenizer, prompt, space).exp().numpy()
                ev.correct_mask = np.array([task.verify(prompt, a).correct for a in space])
            out.append(ev)
    return out


def summarize(evals: Sequence[PromptEval], base: Sequence[PromptEval] | None = None, *,
              ks: Sequence[int] = (1, 4, 16, 64, 256), threshold: float = 1 / 256) -> dict[str, float]:
    """Mean metrics over prompts (module docstring); ``base`` adds the comparisons."""
    res: dict[str, float] = {}
    for k in ks:
        if all(e.probs is not None for e in evals):
            res[f"pass@{k}"] = float(np.mean([M.exact_pass_at_k(e.probs, e.correct_mask, k) for e in evals]))
        else:
            res[f"pass@{k}"] = M.mean_pass_at_k([e.n for e in evals], [e.correct for e in evals], k)
        if evals[0].vectors is not None and k <= min(len(e.vectors) for e in evals):
            res[f"best@{k}"] = float(np.mean([M.best_at_k(e.vectors, k) for e in evals]))
    n = evals[0].n
    res["pass@1_sampled"] = float(np.mean([e.correct / e.n for e in evals]))
    res[f"D_{n}"] = float(np.mean([len(e.correct_outcomes) for e in evals]))
    res[f"D_{n}_semantic"] = float(np.mean([len(e.correct_semantic) for e in evals]))
    res[f"D_{n}_total"] = float(sum(len(e.correct_outcomes) for e in evals))
    res["solved"] = float(sum(e.correct > 0 for e in evals))
    if all(e.probs is not None for e in evals):
        res["answer_entropy"] = float(np.mean([M.entropy(e.probs, e.correct_mask) for e in evals]))
        res["effective_outcomes"] = float(np.mean([M.effective_outcomes(e.probs, e.correct_mask) for e in evals]))
    else:
        res["answer_entropy"] = float(np.mean([M.entropy(np.array(list(e.correct_semantic.values()) or [0.0]))
                                               for e in evals]))
        res["effective_outcomes"] = float(np.exp(res["answer_entropy"]))
    if base is not None:
        if [e.prompt for e in base] != [e.prompt for e in evals]:
            raise ValueError("summarize: base and trained evaluations cover different prompts")
        ch = M.prompt_changes({e.prompt: e.correct for e in base}, {e.prompt: e.correct for e in evals})
        res["prompts_gained"], res["prompts_lost"] = float(len(ch["gained"])), float(len(ch["lost"]))
        if all(e.probs is not None for e in evals):
            sc = [M.support_change(b.probs, e.probs, threshold, mask=b.correct_mask) for b, e in zip(base, evals, strict=True)]
            res["support_base"] = float(sum(len(c.base) for c in sc))
            res["support_retained"] = float(sum(len(c.retained) for c in sc))
            res["support_lost"] = float(sum(len(c.lost) for c in sc))
            res["support_gained"] = float(sum(len(c.gained) for c in sc))
        else:
            kept = lost = gained = total = 0
            for b, e in zip(base, evals, strict=True):
                bs, ts = set(b.correct_semantic), set(e.correct_semantic)
                total += len(bs)
                kept += len(bs & ts)
                lost += len(bs - ts)
                gained += len(ts - bs)
            res["support_base"], res["support_retained"] = float(total), float(kept)
            res["support_lost"], res["support_gained"] = float(lost), float(gained)
    return res


def greedy_reward(task: Task, tokenizer: Any, prompts: Sequence[str]) -> Callable[[Any], float]:
    """``R(model)``: mean reward of greedy completions on ``prompts`` (the ES evaluation)."""
    def evaluate(model: Any) -> float:
        samples = sample_batch(model, tokenizer, prompts, 1, task.max_new_tokens, greedy=True)
        return float(np.mean([task.verify(p, g[0][0]).reward for p, g in zip(prompts, samples, strict=True)]))
    return evaluate


def train_on_task(task: Task, trainer: Any, *, steps: int, prompts_per_step: int = 8, G: int = 8, seed: int = 0,
                  outcome_key: str = "outcome", cluster_key: str = "strategy", temperature: float = 1.0,
                  binary: bool = False, callback: Callable[[int, dict[str, float]], None] | None = None) -> list[dict[str, float]]:
    """Train ``trainer.model`` on ``task`` for ``steps`` updates; returns one stats dict per step.

    Gradient objectives sample ``G`` completions of ``prompts_per_step`` prompts per step and
    call :meth:`PolicyTrainer.step`; ``es`` calls :meth:`PolicyTrainer.es_step`, rewarding
    greedy completions of the step's prompts. If the trainer has a store, each step's groups
    are written to its ``rollouts`` table.
    """
    prompts = task.prompts("train")
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    history = []
    for step in range(steps):
        batch = [prompts[i] for i in rng.choice(len(prompts), size=min(prompts_per_step, len(prompts)), replace=False)]
        if trainer.is_es:
            stats = trainer.es_step(greedy_reward(task, trainer.tokenizer, batch))
        else:
            groups = make_groups(task, trainer.model, trainer.tokenizer, batch, G, temperature=temperature, generator=gen,
                                 outcome_key=outcome_key, cluster_key=cluster_key, step=step, binary=binary)
            if trainer.store is not None:
                trainer.write_rollouts(groups, [g.metadata["texts"] for g in groups])
            stats = trainer.step(groups)
        history.append(stats)
        if callback is not None:
            callback(step, stats)
    return history
