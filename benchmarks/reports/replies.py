"""Real SmolLM2-135M replies replayed to qdevolve's and OpenEvolve's parsers
(``benchmarks/bench_replies.py``), from ``benchmarks/results/replies_smollm2.json`` (the
recording the block operator's cleaning steps were looked at on) and ``replies_heldout.json``
(a later recording with other sampling seeds, looked at only to measure).

Per (prompt, parser): replies, replies parsed into a child, children that evaluated ``ok``,
children better than their parent, and the commonest reasons for the rest, tallied from the
per-reply outcomes the replay stored. The parse share of qdevolve's ``block`` operator comes
with a 90 % bootstrap interval over the recording's (parent, seed) units.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _raw import bootstrap_interval, verdict  # noqa: E402

RAW_NAMES = ("replies_smollm2", "replies_heldout")
LABELS = {"qdevolve-block": "qdevolve `block` (the block's body only)", "qdevolve-diff": "qdevolve `diff`",
          "qdevolve-rewrite": "qdevolve `rewrite`",
          "openevolve-diff": "OpenEvolve 0.4.1 diff prompt (its own `PromptSampler`)"}
PARSER = {"qdevolve": "qdevolve", "openevolve": "OpenEvolve 0.4.1"}
TARGET = 0.9  # the target share of replies parsed into a child


def _tally(raw: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for row, res in zip(raw["replies"], raw["replay"]["rows"], strict=True):
        for parser, r in res.items():
            t = out.setdefault((row["format"], parser), {"n": 0, "parsed": 0, "ok": 0, "better": 0, "why": Counter()})
            t["n"] += 1
            t["parsed"] += bool(r["parsed"])
            t["ok"] += bool(r["ok"])
            t["better"] += bool(r["better"])
            if r.get("reason"):
                t["why"][r["reason"]] += 1
    return out


def _share(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f} %)" if n else "-"


def block_parse_share(raw: dict[str, Any]) -> Any:
    """The block operator's parse share with its interval over (parent, seed) units."""
    units = [float(res["qdevolve"]["parsed"]) for row, res in zip(raw["replies"], raw["replay"]["rows"], strict=True)
             if row["format"] == "qdevolve-block"]
    return bootstrap_interval(units, np.mean)


def render(raw: dict[str, Any]) -> dict[str, str]:
    lines = ["| prompt | parser | replies | parsed into a child | evaluated ok | better than parent | commonest failures |",
             "|---|---|---|---|---|---|---|"]
    for (fmt, parser), t in _tally(raw).items():
        why = "; ".join(f"{r} ({c})" for r, c in t["why"].most_common(2)) or "-"
        lines.append(f"| {LABELS.get(fmt, fmt)} | {PARSER.get(parser, parser)} | {t['n']} | {_share(t['parsed'], t['n'])} "
                     f"| {_share(t['ok'], t['n'])} | {t['better']} | {why.replace('|', '/')} |")
    meta, s, rp = raw["meta"], raw["settings"], raw["replay"]
    first = s.get("first_seed", 0)
    tokens = sum(r["completion_tokens"] for r in raw["replies"])
    secs = sum(r["latency_s"] for r in raw["replies"])
    prov = (f"Recorded {meta['date']} at commit `{meta['commit']}`{' (tree dirty)' if meta.get('dirty') else ''}, "
            f"load {meta['load'][0]}; command `{meta['command']}`; {len(raw['replies'])} replies, seeds {first}-"
            f"{first + s['per_prompt'] - 1} per (parent, prompt), temperature {s['temperature']}, max_tokens "
            f"{s['max_tokens']}; {tokens} completion tokens in {secs:.0f} s of requests. Replayed {rp['date']} at "
            f"commit `{str(rp['commit'])[:7]}`{' (tree dirty)' if rp.get('dirty') else ''}.")
    share = block_parse_share(raw)
    summary = (f"{100 * share.estimate:.0f} % of the block operator's replies parsed into a child "
               f"(90 % interval {100 * share.lo:.0f} to {100 * share.hi:.0f} % over {share.n_units} replies); "
               f"the target >= 90 %: {verdict(share, TARGET, 'greater')}"
               if share.lo is not None else f"{100 * share.estimate:.0f} % of the block operator's replies parsed")
    return {"table": "\n".join(lines), "meta": prov, "summary": summary}
