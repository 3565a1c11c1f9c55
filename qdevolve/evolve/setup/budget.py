"""Token, cost and wall-time budgets: what a run has spent on its models, and when to stop.

Config (every key optional)::

    budget:
      max_tokens: 2_000_000        # prompt + completion tokens, all models together
      max_cost: 5.0                # in the currency of the prices (USD by convention)
      max_wall_time: 3600          # seconds of this invocation (run or resume)
      prices:                      # per model, per million tokens; unknown models cost 0
        gpt-4o-mini: {input: 0.15, output: 0.60}

Cost of one completion: ``(prompt_tokens * input + completion_tokens * output) / 1e6``
with the model's prices (a model absent from ``prices`` costs 0, so a budget in money
never stops a run on an unpriced local model). Tokens come from the usage the backend
reports for every completion, counted when the operator returns its candidates, so
duplicates and failed mutations count too.

Every token the run spends is counted here, whoever spends it: the engine's mutations
(``engine``), each agent's ``tools.generate`` calls while it is scored or modifies itself
(``agent:<program id>``), an LLM judge of the trainer (``judge``) and any other model client
the run builds. They all generate through one wrapper,
:class:`qdevolve.backends.metered.MeteredBackend`, which the run hands to them (a client
such a plugin built itself is wrapped too) and which reports each completion to
:meth:`BudgetMeter.spend`. Totals are kept per model and per spender.

:class:`BudgetMeter` holds those totals; its :meth:`~BudgetMeter.state` is stored with the
run's state in the same transaction as each evaluation and restored on resume (the
per-spender accounts included).
A budget that is reached stops the run cleanly: no new mutation starts, the ones in flight
finish and are stored, and the run is marked ``stopped`` (resumable with a larger budget).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from qdevolve.errors import ConfigError

__all__ = ["BudgetMeter", "ModelUsage", "parse_budget", "BUDGET_KEYS", "spender_line"]

BUDGET_KEYS = ("max_tokens", "max_cost", "max_wall_time", "prices")


def _positive(where: str, key: str, value: Any, *, integer: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0
    if not ok or (integer and float(value) != int(value)):
        kind = "a positive whole number" if integer else "a positive finite number"
        raise ConfigError(f"{where}: 'budget.{key}' must be {kind}, got {value!r}")
    return float(value)


def parse_budget(data: Any, *, where: str = "config") -> dict[str, Any]:
    """Validate the ``budget`` section; returns a plain dict (stored with the run's config).

    Raises:
        ConfigError: an unknown key, a non-positive or non-finite limit, or malformed prices.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: 'budget' must be a mapping, got {type(data).__name__}")
    bad = sorted(set(data) - set(BUDGET_KEYS))
    if bad:
        from qdevolve.suggest import did_you_mean

        hint = did_you_mean(bad, BUDGET_KEYS)
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, bad))} at 'budget'; "
                          f"{hint + ' ' if hint else ''}known keys: {', '.join(BUDGET_KEYS)}")
    out: dict[str, Any] = {}
    if data.get("max_tokens") is not None:
        out["max_tokens"] = int(_positive(where, "max_tokens", data["max_tokens"], integer=True))
    for key in ("max_cost", "max_wall_time"):
        if data.get(key) is not None:
            out[key] = _positive(where, key, data[key])
    prices = data.get("prices") or {}
    if not isinstance(prices, dict):
        raise ConfigError(f"{where}: 'budget.prices' must map a model name to {{input, output}}")
    out["prices"] = {}
    for model, price in prices.items():
        if not isinstance(price, dict) or set(price) - {"input", "output"}:
            raise ConfigError(f"{where}: 'budget.prices.{model}' must be {{input: X, output: Y}} "
                              "(price per million tokens)")
        entry = {}
        for side in ("input", "output"):
            v = price.get(side, 0.0)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ConfigError(f"{where}: 'budget.prices.{model}.{side}' must be a price >= 0, got {v!r}")
            entry[side] = float(v)
        out["prices"][str(model)] = entry
    return out


@dataclass
class ModelUsage:
    """Totals of one model."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class BudgetMeter:
    """Per-model token and cost totals of a run, and the budget they are checked against."""

    max_tokens: int | None = None
    max_cost: float | None = None
    max_wall_time: float | None = None
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    usage: dict[str, ModelUsage] = field(default_factory=dict)  # model -> totals
    spenders: dict[str, ModelUsage] = field(default_factory=dict)  # "engine", "agent:<id>", "judge" -> totals
    started: float = field(default_factory=time.monotonic)  # this invocation's start
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)  # agents spend from threads

    @classmethod
    def from_config(cls, budget: dict[str, Any] | None, state: dict[str, Any] | None = None) -> BudgetMeter:
        """A meter for ``config.budget`` (``None``: account only), restored from a stored ``state``."""
        b = budget or {}
        meter = cls(max_tokens=b.get("max_tokens"), max_cost=b.get("max_cost"),
                    max_wall_time=b.get("max_wall_time"), prices=dict(b.get("prices") or {}))
        for key, target in (("models", meter.usage), ("spenders", meter.spenders)):
            for name, row in ((state or {}).get(key) or {}).items():
                target[str(name)] = _usage_of(row)
        if meter.usage and not meter.spenders:  # stored before per-spender accounts: all of it was the engine's
            meter.spenders["engine"] = _usage_of(_totals(meter.usage.values()))
        return meter

    def cost_of(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        """``(prompt_tokens * input + completion_tokens * output) / 1e6`` (0 for an unpriced model)."""
        price = self.prices.get(model) or {}
        return (prompt_tokens * price.get("input", 0.0) + completion_tokens * price.get("output", 0.0)) / 1e6

    def observe(self, model: str | None, prompt_tokens: int | None, completion_tokens: int | None,
                spender: str = "engine") -> None:
        """Count one completion, against its model and its spender."""
        self.spend(spender, model, prompt_tokens, completion_tokens)

    def spend(self, spender: str, model: str | None, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        """Count one completion that ``spender`` asked for (thread-safe: agents spend from workers)."""
        name = model or "unknown"
        p, c = max(0, int(prompt_tokens or 0)), max(0, int(completion_tokens or 0))
        cost = self.cost_of(name, p, c)
        with self._lock:
            for u in (self.usage.setdefault(name, ModelUsage()), self.spenders.setdefault(spender, ModelUsage())):
                u.calls += 1
                u.prompt_tokens += p
                u.completion_tokens += c
                u.cost += cost

    def observe_candidates(self, candidates: Iterable[Any]) -> None:
        """Count the completion of every candidate an operator returned (one per completion)."""
        seen: set[int] = set()
        for cand in candidates:
            comp = getattr(cand, "completion", None)
            if comp is None or id(comp) in seen:
                continue
            seen.add(id(comp))
            self.observe(getattr(comp, "model", None), getattr(comp, "prompt_tokens", 0),
                         getattr(comp, "completion_tokens", 0))

    @property
    def tokens(self) -> int:
        with self._lock:
            return sum(u.tokens for u in self.usage.values())

    @property
    def cost(self) -> float:
        with self._lock:
            return sum(u.cost for u in self.usage.values())

    def exceeded(self, now: float | None = None) -> str | None:
        """The stop reason when a budget is reached, else ``None``."""
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return f"token budget reached ({self.tokens} of {self.max_tokens} tokens)"
        if self.max_cost is not None and self.cost >= self.max_cost:
            return f"cost budget reached ({self.cost:.4f} of {self.max_cost:g})"
        if self.max_wall_time is not None:
            elapsed = (time.monotonic() if now is None else now) - self.started
            if elapsed >= self.max_wall_time:
                return f"wall-time budget reached ({elapsed:.0f} s of {self.max_wall_time:g} s)"
        return None

    def state(self) -> dict[str, Any]:
        """JSON-able totals (stored in the run state under ``usage``): per model and per spender."""
        with self._lock:
            return {"tokens": self.tokens, "cost": self.cost,
                    "models": {m: _row(u) for m, u in sorted(self.usage.items())},
                    "spenders": {m: _row(u) for m, u in sorted(self.spenders.items())}}


def _row(u: ModelUsage) -> dict[str, Any]:
    return {"calls": u.calls, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "cost": u.cost}


def _usage_of(row: Any) -> ModelUsage:
    row = row if isinstance(row, dict) else {}
    return ModelUsage(int(row.get("calls", 0)), int(row.get("prompt_tokens", 0)),
                      int(row.get("completion_tokens", 0)), float(row.get("cost", 0.0)))


def _totals(rows: Iterable[ModelUsage]) -> dict[str, Any]:
    rows = list(rows)
    return {"calls": sum(u.calls for u in rows), "prompt_tokens": sum(u.prompt_tokens for u in rows),
            "completion_tokens": sum(u.completion_tokens for u in rows), "cost": sum(u.cost for u in rows)}


def spender_line(usage: Any, limit: int = 4) -> str:
    """Who spent what, from a stored ``usage`` state: ``engine 1,200 · agents 3,400 (2) · judge 90``
    (tokens; agents summed, with how many). Empty without per-spender accounts; a stored state
    is data from a database, so malformed entries are skipped, never trusted."""
    spenders = usage.get("spenders") if isinstance(usage, dict) else None
    groups: dict[str, list[int]] = {}
    for name, row in (spenders.items() if isinstance(spenders, dict) else ()):
        try:
            tokens = int(row.get("prompt_tokens", 0)) + int(row.get("completion_tokens", 0))
        except (AttributeError, TypeError, ValueError, OverflowError):
            continue
        key = "agents" if str(name).startswith("agent") else str(name)[:40]
        groups.setdefault(key, []).append(tokens)
    parts = [f"{k} {sum(v):,}" + (f" ({len(v)})" if k == "agents" else "")
             for k, v in sorted(groups.items(), key=lambda kv: -sum(kv[1]))]
    return " · ".join(parts[:limit] + ([f"+{len(parts) - limit} more"] if len(parts) > limit else []))


# Command-line budget options of ``qdevolve run`` and ``qdevolve resume``: (key, flag, help).
BUDGET_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("max_tokens", "--max-tokens", "Stop at this many prompt + completion tokens, all models together "
     "(budget.max_tokens)."),
    ("max_cost", "--max-cost", "Stop at this cost, from budget.prices per million tokens (budget.max_cost)."),
    ("max_wall_time", "--max-wall-time", "Stop after this many seconds of this invocation (budget.max_wall_time)."),
)
MAX_TOKENS_LIMIT = 10**15


def parse_budget_flag(key: str, text: str, *, flag: str | None = None) -> int | float:
    """The value of one budget flag (given as text), checked: one line naming the flag.

    Raises:
        ConfigError: not a number, not finite, not positive, or (tokens) not a whole number.
    """
    flag = flag or "--" + key.replace("_", "-")
    try:
        value = float(text.strip())
    except (ValueError, AttributeError):
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{flag}: expected a positive finite number, got {text!r}")
    if key == "max_tokens":
        if value != int(value) or value > MAX_TOKENS_LIMIT:
            raise ConfigError(f"{flag}: expected a whole number of tokens in [1, {MAX_TOKENS_LIMIT}], got {text!r}")
        return int(value)
    if key == "max_wall_time" and value > 1e9:
        raise ConfigError(f"{flag}: expected at most 1e9 seconds, got {text!r}")
    return value


def with_budget_flags(budget: dict[str, Any] | None, flags: dict[str, str | None]) -> dict[str, Any] | None:
    """``budget`` with the given flags' limits set (unset flags keep the stored limits).

    Returns ``budget`` unchanged when no flag is given; else a new dict, validated again.
    """
    given = {k: parse_budget_flag(k, v) for k, v in flags.items() if v is not None}
    if not given:
        return budget
    return parse_budget({**(budget or {}), **given}, where="command line")


def budget_warnings(budget: dict[str, Any] | None) -> list[str]:
    """Limits that cannot stop a run as configured (a cost budget without any prices)."""
    b = budget or {}
    if b.get("max_cost") is not None and not b.get("prices"):
        return [f"budget.max_cost ({b['max_cost']:g}) never stops this run: budget.prices is empty and "
                "an unpriced model costs 0; add prices per model (per million tokens)"]
    return []
