"""On-disk size of a LoRA run's policy versions on SmolLM2-135M, per LoRA rank.

For each rank: a LoRA run of ``--steps`` trainer steps through the real trainer and checkpoint
code (1 prompt, G = 2 completions of 6 tokens, a fixed reward spread), a version saved after
every step (as the joined loop does), then the bytes of each version directory, of the whole
run's versions, and of the base directory (what one merged version would take). Prints a
table and writes ``benchmarks/results/adapter_sizes.json``. Sizes are deterministic (one seed);
the seconds depend on the machine's load, recorded in ``meta``.

    python benchmarks/bench_adapter_sizes.py --ranks 4,8 --steps 16
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def run(rank: int, steps: int, base: Path) -> dict:
    import numpy as np
    import torch

    from qdevolve import registry
    from qdevolve.db.store import LineageStore
    from qdevolve.rl import checkpoints
    from qdevolve.rl.config import TrainerConfig
    from qdevolve.rl.group import RolloutGroup
    from qdevolve.rl.sampling import sample_group
    from qdevolve.rl.trainer import PolicyTrainer

    with tempfile.TemporaryDirectory() as tmp:
        store = LineageStore(Path(tmp) / "run.sqlite")
        tok = checkpoints._tokenizer(base)
        trainer = PolicyTrainer(checkpoints.load_model_dir(base), tok, registry.objective.create({"type": "grpo"}),
                                TrainerConfig(use_lora=True, lora_r=rank, lora_alpha=2 * rank, learning_rate=2e-3,
                                              max_completion_length=6), store=store)
        trainer.save_version()
        gen = torch.Generator().manual_seed(0)
        t0 = time.perf_counter()
        for _ in range(steps):
            s = sample_group(trainer.model, tok, "def add(a, b):", 2, 6, generator=gen)
            trainer.step([RolloutGroup(rewards=np.array([1.0, 0.0]), token_ids=[x[1] for x in s],
                                       prompt="def add(a, b):")])
            trainer.save_version()
        seconds = time.perf_counter() - t0
        rows = store.policy_versions(trainer.run_id)
        sizes = [dir_bytes(Path(r["path"])) for r in rows]
        adapter = (Path(rows[0]["path"]) / "adapter_model.safetensors").stat().st_size
        state = (Path(rows[-1]["path"]) / "trainer_state.pt").stat().st_size
        total = dir_bytes(checkpoints.checkpoint_root(store, trainer.run_id))
        params = sum(p.numel() for n, p in trainer.model.named_parameters() if "lora_" in n)
    return {"rank": rank, "steps": steps, "versions": len(rows), "adapter_params": params, "adapter_bytes": adapter,
            "trainer_state_bytes": state, "version_bytes": sizes, "total_bytes": total, "seconds": seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="4,8")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "adapter_sizes.json"))
    args = ap.parse_args()
    import torch
    from rich.console import Console
    from rich.table import Table

    from qdevolve.backends.models import resolve_model

    torch.set_num_threads(1)
    base = resolve_model("smollm2-135m-instruct")
    load0 = os.getloadavg()
    runs = [run(int(r), args.steps, base) for r in args.ranks.split(",")]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout)
    raw = {"meta": {"commit": commit, "dirty": dirty, "date": datetime.datetime.now(datetime.UTC).isoformat(),
                    "command": " ".join([Path(sys.executable).name, *sys.argv]),
                    "loadavg": {"start": load0, "end": os.getloadavg()},
                    "machine": {"cpu_count": os.cpu_count(), "torch": torch.__version__}, "seeds": [0]},
           "base_bytes": dir_bytes(base), "runs": runs}
    Path(args.out).write_text(json.dumps(raw, indent=1) + "\n")
    table = Table(title=f"SmolLM2-135M LoRA versions ({args.steps} steps, a version per step; base "
                        f"{raw['base_bytes'] / 1e6:.0f} MB)")
    for col in ("rank", "adapter params", "adapter (MB)", "trainer state (MB)", "versions", "all versions (MB)",
                "seconds"):
        table.add_column(col, justify="right")
    for r in runs:
        table.add_row(str(r["rank"]), f"{r['adapter_params'] / 1e6:.2f} M", f"{r['adapter_bytes'] / 1e6:.2f}",
                      f"{r['trainer_state_bytes'] / 1e6:.2f}", str(r["versions"]), f"{r['total_bytes'] / 1e6:.1f}",
                      f"{r['seconds']:.0f}")
    Console().print(table)


if __name__ == "__main__":
    main()
