"""The summary table's rows about training (a joined run's trainer steps) and the model's replies."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from qdevolve.evolve.report.summary import TrainingSummary
from qdevolve.types import EvalResult, Program

__all__ = ["training_rows", "model_rows"]


def _range(span: tuple[float, float] | None) -> str:
    if span is None:
        return "-"
    lo, hi = span
    return f"{lo:.3g}" if lo == hi else f"{lo:.3g} .. {hi:.3g}"


def training_rows(t: TrainingSummary) -> list[tuple[str, str]]:
    """``(what, value)`` rows: steps, versions, advantage spread, gradient norm, last loss/KL."""
    versions = (f"v{t.versions[0]}" if len(t.versions) == 1 else f"v{t.versions[0]} .. v{t.versions[-1]}"
                f" ({len(t.versions)})")
    rows = [("trainer steps", f"{t.steps} ({t.completions} completions trained on)"),
            ("policy versions", versions)]
    if t.steps:
        rows += [("advantage |A| mean", _range(t.advantage_spread)),
                 ("gradient norm", _range(t.grad_norm))]
        last = ", ".join(f"{k} {v:.3g}" for k, v in (("loss", t.loss), ("KL", t.kl), ("reward mean", t.reward_mean))
                         if isinstance(v, (int, float)))
        if last:
            rows.append(("last step", last))
        if not t.has_signal:
            rows.append(("training signal", "none: every group's rewards were equal (zero advantages); "
                                            "see docs/joined.md"))
    return rows


def model_rows(programs: Iterable[tuple[Program, EvalResult | None]], elapsed_s: float) -> list[tuple[str, str]]:
    """``(what, value)`` rows about the model's replies: parse rate, children ok and tokens/s.

    A reply is a child whose metadata records a completion's ``usage``. Its *parse rate* is
    the share of replies that became a child to evaluate (the operator could read a program
    from it: no ``failed_mutation``); *children ok* the share whose child then evaluated
    ``ok``; both overall and per operator. Tokens/s is completion tokens over the requests'
    own time (one stream's speed; requests in flight together each count their whole time)
    and over the run's wall time. No rows when no child came from a model.
    """
    replies, parsed, ok = Counter[str](), Counter[str](), Counter[str]()
    tokens, latency = 0, 0.0
    for program, result in programs:
        meta = program.metadata if isinstance(program.metadata, dict) else {}
        usage = meta.get("usage")
        if not isinstance(usage, dict):
            continue
        replies[program.operator] += 1
        parsed[program.operator] += not meta.get("failed_mutation")
        ok[program.operator] += bool(result is not None and result.ok)
        tokens += int(usage.get("completion_tokens") or 0)
        latency += float(usage.get("latency_s") or 0.0)
    n = sum(replies.values())
    if not n:
        return []

    def share(count: Counter[str], what: str) -> str:
        per_op = ", ".join(f"{op} {count[op]}/{replies[op]}" for op in sorted(replies))
        return f"{100 * sum(count.values()) / n:.1f}% ({sum(count.values())}/{n} replies {what}; {per_op})"

    rows = [("parse rate", share(parsed, "parsed into a child")),
            ("children ok", share(ok, "gave a child that evaluated ok"))]
    speeds = []
    if latency > 0:
        speeds.append(f"{tokens / latency:.1f} per request")
    if elapsed_s > 0:
        speeds.append(f"{tokens / elapsed_s:.1f} over the run")
    if tokens and speeds:
        rows.append(("tokens/s", f"{', '.join(speeds)} ({tokens} completion tokens)"))
    return rows
