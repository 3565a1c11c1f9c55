"""The README's "Train the mutation policy" commands, run as written, and what they print.

Runs :data:`COMMANDS` (the README's two ``qdevolve train --task few_answer ...`` commands, its
``qdevolve eval-policy ... --json`` and the same evaluation on the held-out ``--split test``)
one after another in a fresh temporary directory, so their ``archives/...`` paths land there
and never in the repository's ``archives/``. Each command is run as ``python -m qdevolve
ARGS`` with this checkout first on ``PYTHONPATH`` (the code measured is this tree's, whatever
the virtual environment's editable install points at).

The tiny base policy is built from scratch in a temporary cache (``QDEVOLVE_CACHE_DIR``), so
the figures do not depend on what ``~/.cache/qdevolve/tiny`` holds; ``--reuse-cache`` uses the
ordinary cache instead, and the raw file's meta says either way whether the base was cached
(``bases_cached``).

Raw file: ``benchmarks/results/readme_train.json`` (``--raw NAME`` for another): the commands
as run (with return codes and wall times), the base's build record, and per split (``train``,
``test``) and arm (``base``, ``ips``, ``grpo``) the metrics ``eval-policy`` wrote. Rendered by
``benchmarks/reports/readme_train.py`` into the README's table and held-out sentence.

    python benchmarks/bench_readme_train.py [--reuse-cache] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _raw import start_meta, write_raw  # noqa: E402

# Exactly the README's commands (its line continuations joined), in order; the last one is the
# held-out evaluation the README's sentence after the table quotes.
COMMANDS: tuple[str, ...] = (
    "qdevolve train --task few_answer --objective grpo --trainer-arg learning_rate=2e-3 --steps 60 --sft-steps 1500 "
    "--db archives/train.sqlite --run-id grpo",
    "qdevolve train --task few_answer --objective ips --objective-arg alpha=1.0 --trainer-arg learning_rate=2e-3 "
    "--steps 60 --sft-steps 1500 --db archives/train.sqlite --run-id ips",
    "qdevolve eval-policy --task few_answer --db archives/train.sqlite --run-id ips --run-id grpo "
    "--json archives/compare.json",
    "qdevolve eval-policy --task few_answer --db archives/train.sqlite --run-id ips --run-id grpo --split test "
    "--json archives/compare_test.json",
)
# The eval-policy command of each split and the JSON it writes.
EVALS: dict[str, tuple[str, str]] = {"train": (COMMANDS[2], "archives/compare.json"),
                                     "test": (COMMANDS[3], "archives/compare_test.json")}
ARMS = ("ips", "grpo")  # the run ids the commands train; "base" is their shared version 0
TASK = "few_answer"


def run_command(command: str, cwd: Path, env: dict[str, str], log: Path) -> dict[str, Any]:
    """Run one README command (``qdevolve ...``) in ``cwd``; its record. Output goes to ``log``."""
    words = shlex.split(command)
    assert words[0] == "qdevolve", command
    argv = [sys.executable, "-m", "qdevolve", *words[1:]]
    t0 = time.time()
    with log.open("a") as out:
        out.write(f"$ {command}\n")
        out.flush()
        proc = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    record = {"command": command, "rc": proc.returncode, "wall_s": round(time.time() - t0, 1)}
    if proc.returncode != 0:
        tail = log.read_text()[-3000:]
        raise SystemExit(f"bench_readme_train: `{command}` failed with exit status {proc.returncode}:\n{tail}")
    return record


def split_metrics(report: dict[str, Any]) -> dict[str, Any]:
    """``{"prompts", "n", "seed", "arms": {"base"|run id: metrics}}`` of one eval-policy JSON."""
    arms: dict[str, Any] = {}
    for row in report["versions"]:
        name = "base" if row.get("base") else row["run_id"]
        if name in arms:
            raise ValueError(f"eval-policy JSON has two rows for {name!r}")
        arms[name] = {"run_id": row["run_id"], "version": row["version"], "step": row.get("step"),
                      "metrics": row["metrics"]}
    missing = {"base", *ARMS} - set(arms)
    if missing:
        raise ValueError(f"eval-policy JSON lacks {sorted(missing)} (rows: {sorted(arms)})")
    return {"prompts": report["prompts"], "n": report["n"], "seed": report["seed"], "ks": report["ks"],
            "key": report["key"], "arms": arms}


def base_record(db: Path, cache: Path, cached_before: set[str]) -> dict[str, Any]:
    """The trained runs' base model directory (the ``model`` of their run config) and its build record."""
    con = sqlite3.connect(db)
    try:
        models = {rid: json.loads(cfg).get("model") for rid, cfg in
                  con.execute("SELECT id, config FROM runs WHERE id IN (?, ?)", ARMS)}
    finally:
        con.close()
    dirs = set(models.values())
    if len(dirs) != 1 or None in dirs:
        raise ValueError(f"the trained runs do not share one base model: {models}")
    path = Path(dirs.pop())
    info_file = path / "qdevolve_tiny.json"
    build = json.loads(info_file.read_text()) if info_file.is_file() else None
    return {"dir_name": path.name, "in_cache": path.parent.resolve() == cache.resolve(),
            "cached_before": path.name in cached_before, "build": build}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reuse-cache", action="store_true",
                    help="use the ordinary tiny-policy cache ($QDEVOLVE_CACHE_DIR or ~/.cache/qdevolve/tiny) "
                         "instead of a fresh temporary one")
    ap.add_argument("--keep", type=Path, default=None, help="copy the temporary directory here at the end")
    ap.add_argument("--raw", default="readme_train", help="raw result name (benchmarks/results/NAME.json)")
    args = ap.parse_args(argv)

    meta = start_meta()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    with tempfile.TemporaryDirectory(prefix="qdevolve-readme-train-") as tmp_name:
        tmp = Path(tmp_name)
        work = tmp / "work"
        (work / "archives").mkdir(parents=True)
        if args.reuse_cache:
            from qdevolve.rl.tiny import cache_root
            cache = cache_root()
            cache_text = str(cache)
        else:
            cache = tmp / "tiny-cache"
            env["QDEVOLVE_CACHE_DIR"] = str(cache)
            cache_text = "a fresh temporary directory"
        cached_before = {p.name for p in cache.glob(f"{TASK}-*") if (p / "qdevolve_tiny.json").is_file()} \
            if cache.is_dir() else set()
        probe = subprocess.run([sys.executable, "-c", "import qdevolve; print(qdevolve.__file__)"], cwd=work,
                               env=env, capture_output=True, text=True, check=True).stdout.strip()
        if not Path(probe).resolve().is_relative_to(ROOT.resolve()):
            raise SystemExit(f"bench_readme_train: the commands would import qdevolve from {probe}, not {ROOT}")
        log = tmp / "commands.log"
        t0 = time.time()
        runs = []
        for command in COMMANDS:
            runs.append(run_command(command, work, env, log))
            print(f"{runs[-1]['wall_s']:7.1f} s  {command}", flush=True)
        splits = {split: split_metrics(json.loads((work / path).read_text())) for split, (_, path) in EVALS.items()}
        base = base_record(work / "archives" / "train.sqlite", cache, cached_before)
        if args.keep is not None:
            shutil.copytree(tmp, args.keep, dirs_exist_ok=True)
    meta.update({"bases_cached": base["cached_before"], "cache_dir": cache_text, "wall_s": round(time.time() - t0, 1),
                 "runner": "python -m qdevolve, this checkout first on PYTHONPATH, cwd a temporary directory"})
    data = {"settings": {"task": TASK, "arms": list(ARMS), "seed": 0, "base_seed": 0,
                         "eval": {split: {"n": s["n"], "seed": s["seed"], "ks": s["ks"]} for split, s in splits.items()}},
            "commands": list(COMMANDS), "runs": runs, "base": base, "splits": splits}
    path = write_raw(args.raw, data, seeds=[0], meta=meta,
                     command="python benchmarks/bench_readme_train.py" + (" --reuse-cache" if args.reuse_cache else ""))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
