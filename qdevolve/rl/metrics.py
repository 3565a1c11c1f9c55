"""Diversity and coverage metrics of a policy: pass@k, D_n, answer entropy, support, best@k.

Definitions (sources in brackets):

* Unbiased pass@k from n samples with c correct [Chen et al. 2021, "Evaluating Large
  Language Models Trained on Code", arXiv 2107.03374]::

      pass@k = 1 - C(n-c, k) / C(n, k) = 1 - prod_{i=n-c+1..n} (1 - k/i)     (1 if n-c < k)

  The product form never forms large binomials.
* Exact pass@k from an enumerable answer distribution p over answers with correct set S:
  ``1 - (1 - sum_{a in S} p(a))^k`` (independent samples with replacement).
* D_n: distinct correct answers among n samples.
* Answer entropy ``H = -sum_a p(a) log p(a)`` (nats) over outcomes (optionally restricted to a
  subset and renormalised) and the effective number of outcomes ``exp(H)``.
* Share of the top outcome ``max_a p(a) / sum_a p(a)`` and the number of live modes
  ``|{a : p(a) / sum_b p(b) >= share}|`` (``share = 0.02``: answers above 2 % of the correct
  mass), both over a restriction such as the correct answers.
* Jensen-Shannon distance ``sqrt(JS(p, q))`` (natural log, so in [0, sqrt(log 2)]) between
  two distributions, e.g. the trained distribution over correct answers and the uniform one.
* Support at threshold eps: ``{a : p(a) >= eps}``; against a base policy, retained =
  ``|S_base & S| / |S_base|``, lost = ``S_base - S``, gained = ``S - S_base`` [Wu et al. 2025,
  "The Invisible Leash", arXiv 2507.14843].
* Token entropy: mean over (unmasked) positions of ``-sum_v pi(v) log pi(v)``.
* Prompts never solved: prompts with c = 0 correct samples [Hayes et al. 2026, bin 0.0].
* best@k for vector rewards: expected max, over a uniformly random k-subset of the n samples,
  of each sample's scalarised score (mean of its reward vector by default)::

      best@k = sum_{i=1..n} s_(i) C(i-1, k-1) / C(n, k)          s_(1) <= ... <= s_(n)

  and per-test coverage@k (expected fraction of tests passed by at least one of k samples).

Only numpy is needed; torch tensors are accepted wherever arrays are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "pass_at_k",
    "mean_pass_at_k",
    "exact_pass_at_k",
    "distinct_correct",
    "entropy",
    "answer_entropy",
    "effective_outcomes",
    "js_distance",
    "support",
    "SupportChange",
    "support_change",
    "token_entropy",
    "never_solved",
    "prompt_changes",
    "best_at_k",
    "coverage_at_k",
]


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def _check_k(k: int, n: int | None = None) -> int:
    if isinstance(k, bool) or int(k) != k or int(k) < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    if n is not None and int(k) > n:
        raise ValueError(f"pass@k needs k <= n samples; got k={k}, n={n}")
    return int(k)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one prompt from ``n`` samples with ``c`` correct (Chen et al. 2021)."""
    if int(n) != n or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if int(c) != c or not 0 <= c <= n:
        raise ValueError(f"c must be an integer in [0, n={n}], got {c!r}")
    n, c = int(n), int(c)
    k = _check_k(k, n)
    if n - c < k:
        return 1.0
    i = np.arange(n - c + 1, n + 1, dtype=np.float64)
    return float(1.0 - np.prod(1.0 - k / i))


def mean_pass_at_k(ns: Iterable[int], cs: Iterable[int], k: int) -> float:
    """pass@k averaged over prompts (``ns[i]`` samples, ``cs[i]`` correct for prompt i)."""
    values = [pass_at_k(n, c, k) for n, c in zip(ns, cs, strict=True)]
    if not values:
        raise ValueError("mean_pass_at_k needs at least one prompt")
    return float(np.mean(values))


def exact_pass_at_k(probs: Any, correct: Any, k: int) -> float:
    """Exact pass@k ``1 - (1 - P(correct))^k`` of an enumerable answer distribution.

    Args:
        probs: Probability of each answer, shape ``[A]`` (need not sum to exactly 1: it is
            the model's mass on the enumerated answers), or a ``{answer: p}`` mapping.
        correct: Boolean mask ``[A]``, or the set of correct answers when ``probs`` is a mapping.
        k: Samples.
    """
    k = _check_k(k)
    if isinstance(probs, Mapping):
        correct_set = set(correct)
        p_correct = float(sum(p for a, p in probs.items() if a in correct_set))
    else:
        p = _to_numpy(probs)
        mask = np.asarray(correct, dtype=bool)
        if mask.shape != p.shape:
            raise ValueError(
                f"correct mask shape {mask.shape} does not match probs shape {p.shape}"
            )
        p_correct = float(p[mask].sum())
    if not -1e-12 <= p_correct <= 1.0 + 1e-9:
        raise ValueError(f"probability of a correct answer must lie in [0, 1], got {p_correct}")
    p_correct = min(max(p_correct, 0.0), 1.0)
    if p_correct == 1.0:
        return 1.0
    return float(-np.expm1(k * np.log1p(-p_correct)))


def distinct_correct(answers: Sequence[Hashable], correct: Sequence[bool]) -> int:
    """D_n: how many distinct answers appear among the correct samples."""
    if len(answers) != len(correct):
        raise ValueError(f"{len(answers)} answers but {len(correct)} correctness flags")
    return len({a for a, ok in zip(answers, correct, strict=True) if ok})


def _as_probs(dist: Any, mask: Any = None) -> np.ndarray:
    if isinstance(dist, Mapping):
        keys = list(dist)
        p = np.asarray([dist[a] for a in keys], dtype=np.float64)
        if mask is not None:
            allowed = set(mask)
            p = p[np.asarray([a in allowed for a in keys], dtype=bool)]
    else:
        p = _to_numpy(dist).ravel()
        if mask is not None:
            m = np.asarray(mask, dtype=bool).ravel()
            if m.shape != p.shape:
                raise ValueError(
                    f"mask shape {m.shape} does not match distribution shape {p.shape}"
                )
            p = p[m]
    if np.any(p < 0) or not np.all(np.isfinite(p)):
        raise ValueError("probabilities must be finite and non-negative")
    return p


def entropy(dist: Any, mask: Any = None) -> float:
    """Shannon entropy (nats) of a distribution, renormalised after optional restriction.

    Args:
        dist: Probabilities ``[A]`` or counts, or a ``{outcome: p}`` mapping.
        mask: Boolean mask ``[A]`` (or a set of outcomes for a mapping) restricting the
            outcomes, e.g. to the correct ones. Zero total mass gives 0.
    """
    p = _as_probs(dist, mask)
    total = p.sum()
    if total <= 0:
        return 0.0
    q = p[p > 0] / total
    return float(-(q * np.log(q)).sum())


def answer_entropy(samples: Iterable[Hashable], restrict: Iterable[bool] | None = None) -> float:
    """Plug-in entropy (nats) of the empirical answer distribution of samples.

    ``restrict`` (one flag per sample, e.g. correctness) keeps only flagged samples.
    """
    samples = list(samples)
    if restrict is not None:
        flags = list(restrict)
        if len(flags) != len(samples):
            raise ValueError(f"{len(samples)} samples but {len(flags)} flags")
        samples = [s for s, f in zip(samples, flags, strict=True) if f]
    return entropy(np.asarray(list(Counter(samples).values()), dtype=np.float64))


def effective_outcomes(dist: Any, mask: Any = None) -> float:
    """Effective number of outcomes ``exp(H)`` (1 for a point mass, A for uniform over A)."""
    return float(np.exp(entropy(dist, mask)))


def top_share(dist: Any, mask: Any = None) -> float:
    """Share of the largest outcome in the (restricted, renormalised) mass; 0 for no mass."""
    p = _as_probs(dist, mask)
    total = p.sum()
    return float(p.max() / total) if p.size and total > 0 else 0.0


def modes_above(dist: Any, share: float = 0.02, mask: Any = None) -> int:
    """How many outcomes hold at least ``share`` of the (restricted) mass (live modes)."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1], got {share!r}")
    p = _as_probs(dist, mask)
    total = p.sum()
    return int((p / total >= share).sum()) if total > 0 else 0


def js_distance(p: Any, q: Any, mask: Any = None) -> float:
    """Jensen-Shannon distance ``sqrt(JS(p, q))`` (nats) between two aligned distributions.

    Both are renormalised after the optional ``mask`` restriction (as :func:`entropy`).
    """
    a, b = _as_probs(p, mask), _as_probs(q, mask)
    if a.shape != b.shape:
        raise ValueError(f"distributions differ in shape: {a.shape} vs {b.shape}")
    if a.sum() <= 0 or b.sum() <= 0:
        raise ValueError("js_distance needs two distributions with positive mass")
    a, b = a / a.sum(), b / b.sum()
    m = 0.5 * (a + b)

    def kl(x: np.ndarray) -> float:
        nz = x > 0
        return float((x[nz] * np.log(x[nz] / m[nz])).sum())

    return float(np.sqrt(max(0.5 * kl(a) + 0.5 * kl(b), 0.0)))


def support(dist: Mapping[Hashable, float] | Any, threshold: float) -> set[Any]:
    """Outcomes with probability ``>= threshold`` (indices for an array)."""
    if threshold <= 0:
        raise ValueError(f"support threshold must be > 0, got {threshold!r}")
    if isinstance(dist, Mapping):
        return {a for a, p in dist.items() if p >= threshold}
    p = _to_numpy(dist).ravel()
    return {int(i) for i in np.flatnonzero(p >= threshold)}


@dataclass(frozen=True)
class SupportChange:
    """Support of a trained policy against its base at one threshold."""

    base: frozenset[Any]
    trained: frozenset[Any]
    retained: frozenset[Any] = field(init=False)
    lost: frozenset[Any] = field(init=False)
    gained: frozenset[Any] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "retained", self.base & self.trained)
        object.__setattr__(self, "lost", self.base - self.trained)
        object.__setattr__(self, "gained", self.trained - self.base)

    @property
    def retained_fraction(self) -> float:
        """``|S_base & S| / |S_base|`` (1.0 when the base support is empty)."""
        return len(self.retained) / len(self.base) if self.base else 1.0

    def to_dict(self) -> dict[str, float]:
        return {
            "base": len(self.base),
            "trained": len(self.trained),
            "retained": len(self.retained),
            "lost": len(self.lost),
            "gained": len(self.gained),
            "retained_fraction": self.retained_fraction,
        }


def support_change(base: Any, trained: Any, threshold: float, mask: Any = None) -> SupportChange:
    """Support retained / lost / gained by ``trained`` against ``base`` at ``threshold``.

    ``base`` and ``trained`` are aligned probability arrays or ``{outcome: p}`` mappings;
    ``mask`` (a boolean array or a set of outcomes) restricts both, e.g. to correct answers.
    """
    b, t = support(base, threshold), support(trained, threshold)
    if mask is not None:
        if isinstance(mask, (set, frozenset)):
            keep = set(mask)
        else:
            keep = {int(i) for i in np.flatnonzero(np.asarray(mask, dtype=bool))}
        b, t = b & keep, t & keep
    return SupportChange(frozenset(b), frozenset(t))


def token_entropy(logits: Any = None, *, logprobs: Any = None, mask: Any = None) -> float:
    """Mean per-position entropy (nats) of next-token distributions.

    Args:
        logits: ``[..., V]`` unnormalised scores (softmax is taken), or
        logprobs: ``[..., V]`` full log-probability vectors.
        mask: ``[...]`` positions to average over (all when ``None``).
    """
    if (logits is None) == (logprobs is None):
        raise ValueError("pass exactly one of logits= or logprobs=")
    if logits is not None:
        z = _to_numpy(logits)
        z = z - z.max(axis=-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    else:
        logp = _to_numpy(logprobs)
    p = np.exp(logp)
    h = -(p * np.where(p > 0, logp, 0.0)).sum(axis=-1)
    if mask is None:
        return float(h.mean()) if h.size else 0.0
    m = _to_numpy(mask)
    if m.shape != h.shape:
        raise ValueError(f"mask shape {m.shape} does not match positions shape {h.shape}")
    total = m.sum()
    return float((h * m).sum() / total) if total > 0 else 0.0


def never_solved(correct_counts: Mapping[Hashable, int] | Sequence[int]) -> list[Any]:
    """Prompts (keys, or indices for a sequence) with zero correct samples."""
    items = (
        correct_counts.items() if isinstance(correct_counts, Mapping) else enumerate(correct_counts)
    )
    return [p for p, c in items if c == 0]


def prompt_changes(
    base_counts: Mapping[Hashable, int], trained_counts: Mapping[Hashable, int]
) -> dict[str, list[Any]]:
    """Prompts newly solved (``gained``) and no longer solved (``lost``) against the base.

    A prompt is solved when at least one of its samples is correct.
    """
    if set(base_counts) != set(trained_counts):
        raise ValueError("base and trained counts must cover the same prompts")
    gained = [p for p in base_counts if base_counts[p] == 0 and trained_counts[p] > 0]
    lost = [p for p in base_counts if base_counts[p] > 0 and trained_counts[p] == 0]
    return {"gained": gained, "lost": lost}


def _order_statistic_weights(n: int, k: int) -> np.ndarray:
    """``C(i-1, k-1) / C(n, k)`` for i = 1..n, by the recursion w_n = k/n, w_{i-1} = w_i (i-k)/(i-1)."""
    w = np.zeros(n, dtype=np.float64)
    w[n - 1] = k / n
    for i in range(n, k, -1):
        w[i - 2] = w[i - 1] * (i - k) / (i - 1)
    return w


def best_at_k(vectors: Any, k: int, weights: Any = None) -> float:
    """Expected best scalarised score among a random k-subset of n samples.

    Args:
        vectors: ``[n, T]`` reward vectors (or ``[n]`` scalar scores).
        k: Subset size, ``1 <= k <= n``.
        weights: Optional ``[T]`` scalarisation (default: the mean over tests, i.e. the
            fraction of tests passed for binary vectors).
    """
    v = _to_numpy(vectors)
    if v.ndim == 1:
        s = v
    elif v.ndim == 2:
        s = v.mean(axis=1) if weights is None else v @ _to_numpy(weights)
    else:
        raise ValueError(f"vectors must be [n, T] or [n], got shape {v.shape}")
    n = s.shape[0]
    if n == 0:
        raise ValueError("best_at_k needs at least one sample")
    k = _check_k(k, n)
    return float(np.sort(s) @ _order_statistic_weights(n, k))


def coverage_at_k(vectors: Any, k: int, threshold: float = 1.0) -> float:
    """Expected fraction of tests passed (value >= threshold) by at least one of k samples."""
    v = _to_numpy(vectors)
    if v.ndim != 2:
        raise ValueError(f"vectors must be [n, T], got shape {v.shape}")
    n, t = v.shape
    k = _check_k(k, n)
    if t == 0:
        return 0.0
    passed = (v >= threshold).sum(axis=0)
    return float(np.mean([pass_at_k(n, int(c), k) for c in passed]))
