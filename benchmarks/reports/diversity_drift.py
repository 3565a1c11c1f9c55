"""Mean-field drift of the diversity objectives (``benchmarks/bench_drift.py``) from
``benchmarks/results/diversity_drift.json`` alone.

A row of the raw file is one arm at one pass@1 level: the mean over the sampled groups of the
logit change ``dz_k = sum_i A_i (1[o_i = k] - p_k)`` of every outcome ``k`` (correct answers by
decreasing Zipf share, then the wrong outcome) and the mean sum of a group's advantages ``S``.
Definitions of the table's columns:

* **favourite**, **2nd**, **rarest correct**, **wrong**: ``dz`` of the correct answers of rank
  1, 2 and last, and of the wrong outcome;
* **fav - last**: ``dz`` of the favourite minus that of the rarest correct answer; > 0 means the
  objective moves mass toward the favourite (rich get richer), < 0 toward the rarest;
* **sum A**: ``S``; the term ``-p_k S`` of ``dz_k`` lifts every outcome in proportion to its
  probability when ``S < 0``.

The reading is computed from the rows: at each level, which arms move mass toward the favourite
and which toward the rarest answer (the sign of ``fav - last``; ``|fav - last| < 0.0005``, which
prints as 0.000, counts as neither), each arm's ``fav - last`` as a share of GRPO's, the arms whose
advantages do not sum to zero (``|S| >= 0.005``), and the chance that the favourite and the
rarest answer appear among a group's G samples, ``1 - (1 - p)^G``.

Keys: ``setup``, ``table``, ``reading``; figures ``fav_last-<arm>-<level>``,
``sum_a-<arm>-<level>`` (``<arm>`` the arm's key: grpo, ips, rare, rare_all, rare_alpha3),
``appear-fav-<level>``, ``appear-rarest-<level>`` and ``signs-<level>`` (the sign sentence of
one level).
"""

from __future__ import annotations

from typing import Any

ZERO_DRIFT = 0.0005  # |fav - last| below this prints as +0.000: no drift either way
ZERO_SUM = 0.005  # |sum A| below this prints as +0.00


def _level(p: float) -> str:
    return f"{p:g}"


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def fav_last(row: dict[str, Any], n_correct: int) -> float:
    return row["drift"][0] - row["drift"][n_correct - 1]


def signs(rows: list[dict[str, Any]], n_correct: int, level: float) -> str:
    """One sentence: which arms move mass toward the favourite, which toward the rarest answer."""
    up, down, flat = [], [], []
    for r in rows:
        d = fav_last(r, n_correct)
        item = f"{r['arm']} ({d:+.3f})"
        (up if d >= ZERO_DRIFT else down if d <= -ZERO_DRIFT else flat).append(item)
    parts = []
    if up:
        parts.append(f"{_join(up)} move{'s' * (len(up) == 1)} mass toward the favourite")
    if down:
        parts.append(f"{_join(down)} move{'s' * (len(down) == 1)} it toward the rarest correct answer")
    if flat:
        parts.append(f"{_join(flat)} move{'s' * (len(flat) == 1)} neither way")
    return f"At pass@1 {_level(level)} (sign of fav - last), " + "; ".join(parts) + "."


def render(raw: dict[str, Any]) -> dict[str, str]:
    s = raw["settings"]
    g, n = s["G"], s["n_correct"]
    levels = s.get("levels") or sorted({r["pass1"] for r in raw["rows"]})
    out: dict[str, str] = {}
    lines = ["| pass@1 | arm | favourite | 2nd | rarest correct | wrong | fav - last | sum A |",
             "|---|---|---|---|---|---|---|---|"]
    reading = []
    share_text = []
    for p1 in levels:
        rows = [r for r in raw["rows"] if r["pass1"] == p1]
        lv = _level(p1)
        p = s["shares"][str(p1)] if str(p1) in s.get("shares", {}) else None
        for r in rows:
            d = r["drift"]
            fl = fav_last(r, n)
            lines.append(f"| {lv} | {r['arm']} | {d[0]:+.3f} | {d[1]:+.3f} | {d[n - 1]:+.3f} | {d[n]:+.3f} | "
                         f"{fl:+.3f} | {r['sum_advantages']:+.2f} |")
            out[f"fav_last-{r['arm_key']}-{lv}"] = f"{fl:+.2f}"
            out[f"sum_a-{r['arm_key']}-{lv}"] = f"{r['sum_advantages']:+.2f}"
        if not rows:
            continue
        sentence = signs(rows, n, p1)
        out[f"signs-{lv}"] = sentence
        reading.append(sentence)
        ref = next((r for r in rows if r["arm_key"] == "grpo"), None)
        if ref is not None and abs(fav_last(ref, n)) >= ZERO_DRIFT:
            rel = [f"{r['arm']} {fav_last(r, n) / fav_last(ref, n):.2f}x" for r in rows if r is not ref]
            if rel:
                reading.append(f"As a share of GRPO's fav - last ({fav_last(ref, n):+.3f}): {_join(rel)}.")
        nonzero = [r for r in rows if abs(r["sum_advantages"]) >= ZERO_SUM]
        if nonzero:
            neg = [r for r in nonzero if r["sum_advantages"] < 0]
            sums = _join([f"{r['arm']} ({r['sum_advantages']:+.2f})" for r in nonzero])
            tail = (f"; where the sum is negative ({_join([r['arm'] for r in neg])}) the -p_k sum A term lifts "
                    f"every outcome in proportion to its probability." if neg else ".")
            reading.append(f"Advantages that do not sum to zero: {sums}{tail}")
        else:
            reading.append("Every arm's advantages sum to zero at this level.")
        if p is not None:
            fav, rare = 1 - (1 - p[0]) ** g, 1 - (1 - p[n - 1]) ** g
            out[f"appear-fav-{lv}"], out[f"appear-rarest-{lv}"] = f"{fav:.2f}", f"{rare:.2f}"
            share_text.append(f"at pass@1 {lv}: {', '.join(f'{x:.3f}' for x in p[:n])}, wrong {p[n]:.2f}")
            reading.append(f"A group of {g} holds the favourite with probability {fav:.2f} and the rarest correct "
                           f"answer with {rare:.2f} (1 - (1 - p)^G).")
    zipf = s.get("zipf_exponent", 1)
    out["setup"] = (f"Expected logit change per group of G = {g} for a tabular softmax at the diversity benchmark's "
                    f"base in miniature: {n} correct answers with Zipf({zipf:g}) shares of pass@1 (reward 1) and one "
                    f"wrong outcome (reward 0)" + (f" (shares {'; '.join(share_text)})" if share_text else "")
                    + f"; {s['groups']:,} groups of G sampled per level, seed {s['seed']} "
                    f"(`bench_diversity.mean_field_drift`). `fav - last` > 0 means the favourite gains on the rarest "
                    f"correct answer; `sum A` is the mean sum of a group's advantages.")
    out["table"] = "\n".join(lines)
    out["reading"] = " ".join(reading) or "No rows."
    return out
