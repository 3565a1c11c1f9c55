"""The README's "Train the mutation policy" figures (``benchmarks/bench_readme_train.py``), from
``benchmarks/results/readme_train.json``: what the section's commands print.

Keys: ``table`` (a ``report`` block: pass@1, pass@4, pass@n, effective answers and distinct
correct answers of the base and each trained arm on the trained prompts), and inline figures
``setup`` (the settings the commands ran with), ``summary`` (what training did on the trained
prompts) and ``heldout`` (the ``--split test`` sentence). Every comparison word ("raises",
"both fall below", "keeps ... where ... lowers") is decided from the raw numbers, rounded as
they are printed (three decimals for pass@k, two for answer counts), so equal printed numbers
never read as a change.
"""

from __future__ import annotations

from typing import Any

P_DIGITS, COUNT_DIGITS = 3, 2
NAMES = {"ips": "IPS", "grpo": "GRPO"}


def _name(arm: str) -> str:
    return NAMES.get(arm, arm)


def _cmp(x: float, ref: float, digits: int) -> int:
    """-1, 0 or 1: ``x`` against ``ref`` as printed with ``digits`` decimals."""
    a, b = round(x, digits), round(ref, digits)
    return (a > b) - (a < b)


def _arms(raw: dict[str, Any]) -> list[str]:
    return list(raw["settings"]["arms"])


def _m(split: dict[str, Any], arm: str, key: str) -> float:
    return float(split["arms"][arm]["metrics"][key])


def table(raw: dict[str, Any], split_name: str = "train") -> str:
    split = raw["splits"][split_name]
    n = split["n"]
    cols = ("pass@1", "pass@4", f"pass@{n}")
    label = "trained" if split_name == "train" else "held-out"
    lines = [f"| {split['prompts']} {label} prompts | " + " | ".join(cols) +
             f" | effective answers | distinct correct answers (of {n} samples) |",
             "|---|" + "---|" * (len(cols) + 2)]
    for arm in ("base", *_arms(raw)):
        cells = [f"{_m(split, arm, c):.{P_DIGITS}f}" for c in cols]
        cells += [f"{_m(split, arm, 'effective_outcomes'):.{COUNT_DIGITS}f}", f"{_m(split, arm, f'D_{n}'):.{COUNT_DIGITS}f}"]
        lines.append(f"| {'base (v0)' if arm == 'base' else arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def setup(raw: dict[str, Any]) -> str:
    s, ev = raw["settings"], raw["settings"]["eval"]["train"]
    cached = raw["meta"].get("bases_cached")
    base = {True: "the base read from the tiny-policy cache", False: "the base pre-trained afresh, not read from a cache",
            None: "whether the base came from a cache not recorded"}[cached]
    return (f"`--seed {s['seed']}`, `--base-seed {s['base_seed']}`, exact metrics from `eval-policy`'s defaults, "
            f"n = {ev['n']}, seed {ev['seed']}; {base}")


def _pass1_verb(d: int) -> str:
    return {1: "raises pass@1", -1: "lowers pass@1", 0: "keeps pass@1"}[d]


def _answers(eff: float, base_eff: float, *, against: bool) -> str:
    """What an arm did to the base's spread of correct answers (effective answers per prompt)."""
    e = f"{eff:.{COUNT_DIGITS}f} effective answers" + (f" against the base's {base_eff:.{COUNT_DIGITS}f}" if against else "")
    if round(eff, COUNT_DIGITS) < 1.5:
        return f"collapses onto one answer per prompt ({e})"
    d = _cmp(eff, base_eff, COUNT_DIGITS)
    if d > 0:
        return f"spreads over more answers than the base ({e})"
    if d == 0:
        return f"keeps the base's spread of answers ({e})"
    if round(eff, COUNT_DIGITS) >= round(base_eff, COUNT_DIGITS) / 2:
        return f"keeps most of the base's answers ({e})"
    return f"narrows the base's answers ({e})"


def summary(raw: dict[str, Any]) -> str:
    """Trained prompts: each arm's pass@1 and spread against the base, the higher pass@1 first."""
    split = raw["splits"]["train"]
    b1, beff = _m(split, "base", "pass@1"), _m(split, "base", "effective_outcomes")
    arms = sorted(_arms(raw), key=lambda a: -_m(split, a, "pass@1"))
    parts, first = [], None
    for arm in arms:
        p1 = _m(split, arm, "pass@1")
        d = _cmp(p1, b1, P_DIGITS)
        if d == 0:
            head = f"{_name(arm)} keeps pass@1 at the base's {b1:.{P_DIGITS}f}"
        elif first is None:
            head = f"{_name(arm)} {_pass1_verb(d)} from the base's {b1:.{P_DIGITS}f} to {p1:.{P_DIGITS}f}"
        else:
            more = "" if d != first[0] else \
                {1: " more", -1: " less", 0: " as much"}[_cmp(abs(p1 - b1), abs(first[1] - b1), P_DIGITS)]
            head = f"{_name(arm)} {_pass1_verb(d)}{more}, to {p1:.{P_DIGITS}f},"
        parts.append(f"{head} and {_answers(_m(split, arm, 'effective_outcomes'), beff, against=first is None)}")
        first = first or (d, p1)
    return "; ".join(parts)


def heldout(raw: dict[str, Any]) -> str:
    """The ``--split test`` sentence: pass@1 against the base, pass@n, effective answers."""
    split = raw["splits"]["test"]
    n = split["n"]
    arms = _arms(raw)
    b1 = _m(split, "base", "pass@1")
    ds = [_cmp(_m(split, a, "pass@1"), b1, P_DIGITS) for a in arms]
    base1 = f"the base's pass@1 ({b1:.{P_DIGITS}f})"
    rel = {1: "rises above", -1: "falls below", 0: "matches"}
    if len(set(ds)) == 1:
        plural = {1: "rise above", -1: "fall below", 0: "match"}
        p1 = f"{'both' if len(arms) == 2 else 'all'} {plural[ds[0]]} {base1}"
    else:
        p1 = f"{_name(arms[0])} {rel[ds[0]]} {base1} while " + " and ".join(
            f"{_name(a)} {rel[d]} it" for a, d in zip(arms[1:], ds[1:], strict=True))
    reaches = f"{_name(arms[0])} reaches {_m(split, arms[0], 'pass@1'):.{P_DIGITS}f}, " + ", ".join(
        f"{_name(a)} {_m(split, a, 'pass@1'):.{P_DIGITS}f}" for a in arms[1:])
    key = f"pass@{n}"
    bn = _m(split, "base", key)
    dn = [_cmp(_m(split, a, key), bn, P_DIGITS) for a in arms]
    vals = [f"{_m(split, a, key):.{P_DIGITS}f}" for a in arms]
    if len(set(dn)) == 1 and dn[0] == 0:
        pn = f"Both keep {key} at the base's {bn:.{P_DIGITS}f}" if len(arms) == 2 else \
            f"All keep {key} at the base's {bn:.{P_DIGITS}f}"
    elif len(set(dn)) == 1:
        verb = "raise" if dn[0] > 0 else "lower"
        pn = (f"{'Both' if len(arms) == 2 else 'All'} {verb} {key} from the base's {bn:.{P_DIGITS}f}: " +
              ", ".join(f"{_name(a)} to {v}" for a, v in zip(arms, vals, strict=True)))
    else:
        verbs = {0: "keeps {m} at {v}", -1: "lowers {m} to {v}", 1: "raises {m} to {v}"}
        pn = f"{_name(arms[0])} " + verbs[dn[0]].format(m=key, v=vals[0]) + " where " + " and ".join(
            f"{_name(a)} " + verbs[d].format(m="it", v=v) for a, d, v in zip(arms[1:], dn[1:], vals[1:], strict=True))
        if 0 not in dn:
            pn += f" (the base: {bn:.{P_DIGITS}f})"
    eff = "Effective answers per prompt: " + ", ".join(
        f"{_name(a)} {_m(split, a, 'effective_outcomes'):.{COUNT_DIGITS}f}" for a in arms) + \
        f" (the base: {_m(split, 'base', 'effective_outcomes'):.{COUNT_DIGITS}f})"
    return f"On the {split['prompts']} held-out prompts (`--split test`), {p1}: {reaches}. {pn}. {eff}."


def render(raw: dict[str, Any]) -> dict[str, str]:
    return {"table": table(raw), "table-test": table(raw, "test"), "setup": setup(raw), "summary": summary(raw),
            "heldout": heldout(raw)}
