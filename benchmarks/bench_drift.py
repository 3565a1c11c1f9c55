"""Mean-field drift of the diversity objectives, alone: the expected per-group logit change of each
outcome for a tabular softmax at the diversity benchmark's base in miniature
(``bench_diversity.mean_field_drift``), written as a raw file.

Per pass@1 level and arm (``bench_diversity.DRIFT_ARMS``: the benchmark's GRPO, IPS and Rare,
plus two other readings of Rare) it records the mean drift of every outcome (the correct answers
by decreasing Zipf share, then the wrong outcome) and the mean sum of a group's advantages, with
the settings that define the miniature: G, the number of correct answers, the Zipf exponent and
the shares that follow from it, the number of sampled groups and the seed. The draws are seeded,
so the same settings give the same figures. About 23 CPU seconds.

    python benchmarks/bench_drift.py                 # pass@1 0.75 and 0.9, 20,000 groups, seed 0
    python benchmarks/bench_drift.py --raw NAME      # benchmarks/results/NAME.json instead

Raw file: ``benchmarks/results/diversity_drift.json``; table and reading:
``benchmarks/reports/diversity_drift.py`` (``python benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import bench_diversity as bd  # noqa: E402
from _raw import start_meta, write_raw  # noqa: E402

# the arms' short keys (figure keys of the renderer); every DRIFT_ARMS name needs one
ARM_KEYS = {"grpo": "grpo", "ips": "ips", "rare": "rare", "rare (all signs, all counted)": "rare_all",
            "rare (alpha = 3)": "rare_alpha3"}
ZIPF = 1.0  # the exponent mean_field_drift uses: shares proportional to 1 / rank


def shares(pass1: float, n_correct: int) -> list[float]:
    """The outcome probabilities of ``mean_field_drift``: Zipf(1) shares of ``pass1`` over the
    correct answers by rank, then the wrong outcome's ``1 - pass1``."""
    q = [1.0 / (k + 1) ** ZIPF for k in range(n_correct)]
    return [pass1 * x / sum(q) for x in q] + [1.0 - pass1]


def measure(levels: list[float], n_correct: int, groups: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    for p1 in levels:
        t = time.process_time()
        out = bd.mean_field_drift(p1, n_correct=n_correct, groups=groups, seed=seed)
        print(f"pass@1 {p1}: {time.process_time() - t:.1f} CPU s", flush=True)
        for arm, (drift, total) in out.items():
            rows.append({"pass1": p1, "arm": arm, "arm_key": ARM_KEYS.get(arm, arm), "drift": drift,
                         "sum_advantages": total})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="0.75,0.9", help="pass@1 levels of the miniature base")
    ap.add_argument("--n-correct", type=int, default=5, help="correct answers (Zipf shares)")
    ap.add_argument("--groups", type=int, default=20000, help="sampled groups of G per level")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--raw", default="diversity_drift", help="raw file name under benchmarks/results/")
    args = ap.parse_args(argv)
    levels = [float(x) for x in args.levels.split(",") if x]
    meta = start_meta()
    t0 = time.perf_counter()
    rows = measure(levels, args.n_correct, args.groups, args.seed)
    own = resource.getrusage(resource.RUSAGE_SELF)
    settings = {"G": bd.G, "n_correct": args.n_correct, "zipf_exponent": ZIPF, "groups": args.groups,
                "seed": args.seed, "levels": levels, "shares": {str(p): shares(p, args.n_correct) for p in levels},
                "rewards": "1 for each correct answer, 0 for the wrong outcome",
                "arms": {name: {"key": ARM_KEYS.get(name, name), "spec": spec} for name, spec in bd.DRIFT_ARMS.items()},
                "wall_s": time.perf_counter() - t0, "cpu_s": own.ru_utime + own.ru_stime}
    path = write_raw(args.raw, {"settings": settings, "rows": rows}, seeds=[args.seed], meta=meta)
    print(f"raw results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
