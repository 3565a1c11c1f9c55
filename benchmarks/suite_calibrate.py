"""Build the problem suite's two target files from the frozen base (seed 0).

Candidates: random expression-pool programs (a 200,000-draw pool) shown on two or three
distinct inputs in ``0..5``, kept when at least ``--min-classes`` (two for three examples)
semantic classes of pool programs pass every example (the examples underdetermine the function) and the outputs stay within +-999. Each
candidate's difficulty is the frozen base's pass@1 from the seed parent ``x`` (``--n``
samples; candidates with no correct sample get ``--n-hard`` more). Targets are then picked
to spread log-uniformly over pass@1 in [0.2, 0]: ``--train`` go to
``qdevolve/rl/tasks/suite_targets.json``, ``--heldout`` (every k-th by difficulty) to
``qdevolve/rl/tasks/suite_heldout.json``.

    nice -n 19 python benchmarks/suite_calibrate.py
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def candidates(rng: np.random.Generator, n: int, min_classes: int) -> list[tuple[str, tuple, int]]:
    from qdevolve.rl.tasks.expr_dsl import DSLError, evaluate, expression_pool
    from qdevolve.rl.tasks.suite import INPUT_RANGE, SEED_PARENT, matching_classes

    pool = expression_pool(200000, 1)
    keys = sorted(pool)
    out, seen = [], set()
    while len(out) < n:
        target = pool[keys[int(rng.integers(len(keys)))]][0]
        k = int(rng.integers(2, 4))
        xs = sorted(rng.choice(6, size=k, replace=False).tolist())
        try:
            ex = tuple((INPUT_RANGE[x], evaluate(target, INPUT_RANGE[x])) for x in xs)
        except DSLError:
            continue
        if any(abs(y) > 999 for _, y in ex) or ex in seen:
            continue
        if all(evaluate(SEED_PARENT, x) == y for x, y in ex):
            continue
        classes = len(matching_classes(ex, pool))
        if classes < (min_classes if k == 2 else 2):  # three examples rarely leave three classes
            continue
        seen.add(ex)
        out.append((target, ex, classes))
    return out


def pass1(model, tok, targets, n: int, seed: int) -> list[float]:
    import torch

    from qdevolve.rl.sampling import sample_batch
    from qdevolve.rl.tasks.suite import SEED_PARENT, score_child

    gen = torch.Generator().manual_seed(seed)
    hits = [0] * len(targets)
    per = 256
    for start in range(0, len(targets), 4):
        chunk = targets[start:start + 4]
        for _ in range(max(1, n // per)):
            out = sample_batch(model, tok, [t.prompt(SEED_PARENT) for t in chunk], per, 10, 1.0, gen)
            for i, (t, samples) in enumerate(zip(chunk, out, strict=True)):
                hits[start + i] += sum(score_child(t, s[0]).correct for s in samples)
    return [h / max(per, n // per * per) for h in hits]


SEED_PROGRAM = '''"""Suite target {name}: EXPR must reproduce the target's examples (examples/suite/targets.json)."""

TARGET = "{name}"

# EVOLVE-BLOCK-START
EXPR = "x"
# EVOLVE-BLOCK-END
'''


def write_example(train: list[dict]) -> None:
    """``examples/suite``: the training targets (in its evaluator) and one seed program per target."""
    ex = ROOT / "examples" / "suite"
    ev = (ex / "evaluator.py").read_text()
    start, end = ev.index("TARGETS = ["), ev.index("\n]\n", ev.index("TARGETS = [")) + 3
    lines = "".join(f"    {json.dumps(r)},\n" for r in train)
    head = ev[start:ev.index("\n", start) + 1]
    (ex / "evaluator.py").write_text(ev[:start] + head + lines + "]\n" + ev[end:])
    for old in ex.glob("initial_program*.py"):
        old.unlink()
    for i, r in enumerate(train):
        name = "initial_program.py" if i == 0 else f"initial_program_{r['name']}.py"
        (ex / name).write_text(SEED_PROGRAM.format(name=r["name"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", type=int, default=120)
    ap.add_argument("--min-classes", type=int, default=3)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--n-hard", type=int, default=1024)
    ap.add_argument("--train", type=int, default=32)
    ap.add_argument("--heldout", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import torch

    from qdevolve.rl.tasks.suite import SuiteTarget
    from qdevolve.rl.tasks.suite_loop import load_policy, suite_base_dir

    torch.set_num_threads(1)
    t0 = time.time()
    model, tok = load_policy(suite_base_dir(0, ROOT / ".cache" / "suite_bases"))
    rng = np.random.default_rng(args.seed)
    cands = [SuiteTarget(f"c{i}", ex, ref, classes) for i, (ref, ex, classes) in
             enumerate(candidates(rng, args.candidates, args.min_classes))]
    p = pass1(model, tok, cands, args.n, 1)
    zero = [i for i, v in enumerate(p) if v == 0.0]
    if zero:
        more = pass1(model, tok, [cands[i] for i in zero], args.n_hard, 2)
        for i, v in zip(zero, more, strict=True):
            p[i] = v * args.n_hard / (args.n_hard + args.n)
    print(f"calibrated {len(cands)} candidates in {time.time() - t0:.0f} s")
    # spread over log10 pass@1 in [-3.5, -0.7]: bins, one candidate per slot, the zeros at the bottom
    want = args.train + args.heldout
    order = sorted(range(len(cands)), key=lambda i: -p[i])
    eligible = [i for i in order if p[i] <= 0.25]
    grid = np.linspace(math.log10(0.2), -3.5, want)
    chosen: list[int] = []
    for g in grid:
        best = min((i for i in eligible if i not in chosen),
                   key=lambda i: abs(max(math.log10(p[i]) if p[i] > 0 else -4.0, -4.0) - g))
        chosen.append(best)
    chosen.sort(key=lambda i: -p[i])
    rows = []
    for j, i in enumerate(chosen):
        c = cands[i]
        rows.append(SuiteTarget(f"t{j:02d}", c.examples, c.reference, c.classes, round(p[i], 5)).to_json())
    held = rows[2::max(1, len(rows) // args.heldout)][:args.heldout]
    train = [r for r in rows if r not in held]
    for k, r in enumerate(held):
        r["name"] = f"h{k:02d}"
    tasks = ROOT / "qdevolve" / "rl" / "tasks"
    (tasks / "suite_targets.json").write_text(json.dumps(train, indent=1) + "\n")
    (tasks / "suite_heldout.json").write_text(json.dumps(held, indent=1) + "\n")
    write_example(train)
    for r in train + held:
        print(f"{r['name']} {r['reference']:10s} {r['examples']} classes {r['classes']} pass@1 {r['base_pass1']}")


if __name__ == "__main__":
    main()
