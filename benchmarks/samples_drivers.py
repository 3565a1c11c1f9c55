"""One run of one framework against the mutation server, for ``bench_samples.py``.

Each driver runs in a process of its own (``python benchmarks/samples_drivers.py FRAMEWORK
--task DIR --url URL --calls N --concurrency C --workers W --seed S --out DIR``; ShinkaEvolve
under the Python of its own environment) and writes ``evaluations.jsonl`` into ``--out``: one
line per evaluated program, ``{"call": N, "score": x}``, where N is the mutation-server call
that produced the program (read from the ``# bench_samples call N`` tag the server puts in
every reply; the seed is call 0). Every framework evaluates with the task's own
``evaluator.py``; its ``combined_score`` is the score.

Each framework gets its own recommended search settings (``SETTINGS`` states them; the raw
file of ``bench_samples.py`` records them):

* qdevolve: the example's own ``config.yaml`` (its archive, selection and sandbox defaults),
  the ``rewrite`` operator through the ``openai`` backend, ``backend.concurrency =
  run.max_pending = C`` model requests in flight, W evaluation workers; the scores are read
  from its store (every evaluation is kept there).
* OpenEvolve 0.4.1: the settings its ``configs/README.md`` calls "recommended island
  settings for most use cases" (``configs/island_config_example.yaml``): population 500,
  archive 100, 5 islands, migration every 50 generations at rate 0.1, elite selection ratio
  0.1, exploration 0.3, exploitation 0.7, 10 feature bins, 3 top and 2 diverse programs in
  the prompt, ``parallel_evaluations = C`` (that file's 4); full rewrites
  (``diff_based_evolution: false``: the server answers with whole programs) and no cascade
  (the task evaluators have no stages). The scores come from a thin wrapper around the
  task's evaluator that logs every call (OpenEvolve's database deletes programs pushed out
  of their cell).
* ShinkaEvolve 0.0.7: its recommended presets, the defaults of its own ``configs/config.yaml``
  (``database: island_medium``: 2 islands, archive 40, elite selection ratio 0.3, 1 archive
  and 1 top-k inspiration, migration every 10 generations at rate 0, island elitism and
  separation, ``weighted`` parent selection with lambda 10; ``evolution: medium_budget``:
  ``max_patch_resamples: 3``, ``max_patch_attempts: 1``), with full rewrites only
  (``patch_types: [full]``: the server answers with whole programs), one model (no bandit
  over models), no meta-recommendation, embedding or novelty-judge models (they would need
  other endpoints), ``max_proposal_jobs = C``, ``max_evaluation_jobs = W``; the scores come
  from the same kind of wrapper (its ``evaluate.py`` adapter writes ``metrics.json`` /
  ``correct.json``; a program whose ``validity`` is 0 is marked incorrect).

Budgets: OpenEvolve ``max_iterations = N``, ShinkaEvolve ``num_generations = N + 1`` (its
generation 0 is the seed), qdevolve ``iterations = N`` (a duplicate child costs a call but
not an iteration); ``bench_samples.py`` cuts every curve at N calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TAG = re.compile(r"# bench_samples call (\d+)")

SETTINGS = {
    "qdevolve": "the example's config.yaml (archive, selection), rewrite operator, backend.concurrency = "
                "max_pending = C, W evaluation workers",
    "openevolve": "OpenEvolve 0.4.1 configs/island_config_example.yaml ('recommended island settings'): population "
                  "500, archive 100, 5 islands, migration 50 / 0.1, elite 0.1, exploration 0.3, exploitation 0.7, "
                  "10 feature bins, 3 top + 2 diverse programs; full rewrites, no cascade, parallel_evaluations = C",
    "shinka": "ShinkaEvolve 0.0.7 configs/config.yaml presets: database island_medium (2 islands, archive 40, elite "
              "0.3, 1 + 1 inspirations, migration 10 / 0.0, island elitism and separation, weighted parent "
              "selection lambda 10), evolution medium_budget (3 patch resamples, 1 patch attempt); full patches "
              "only, one model, no meta-recommendation / embedding / novelty judge, max_proposal_jobs = C, "
              "max_evaluation_jobs = W",
}

LOGGING_EVALUATOR = '''# Written by bench_samples: the task's evaluator, plus one log line per evaluation.
import importlib.util, json, os, re

_spec = importlib.util.spec_from_file_location("bench_task_evaluator", {inner!r})
_inner = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_inner)


def _log(program_path, result):
    text = open(program_path).read()
    m = re.search(r"# bench_samples call (\\d+)", text)
    score = result.get("combined_score") if isinstance(result, dict) else None
    line = json.dumps({{"call": int(m.group(1)) if m else 0, "score": score}}) + "\\n"
    fd = os.open({log!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def evaluate(program_path):
    result = _inner.evaluate(program_path)
    _log(program_path, result)
    return result
'''

SHINKA_MAIN = '''

def main(program_path, results_dir):
    result = evaluate(program_path)
    os.makedirs(results_dir, exist_ok=True)
    numeric = {{k: float(v) for k, v in result.items() if isinstance(v, (int, float)) and k != "combined_score"}}
    metrics = {{"combined_score": float(result.get("combined_score", 0.0)), "public": numeric}}
    correct = float(result.get("validity", 1.0)) == 1.0
    with open(os.path.join(results_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f)
    with open(os.path.join(results_dir, "correct.json"), "w") as f:
        json.dump({{"correct": correct, "error": None if correct else str(result.get("artifacts"))}}, f)
    return metrics


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--program_path", required=True)
    ap.add_argument("--results_dir", required=True)
    a = ap.parse_args()
    main(a.program_path, a.results_dir)
'''


def _write_evaluator(task: Path, out: Path, shinka: bool = False) -> Path:
    path = out / ("evaluate.py" if shinka else "logging_evaluator.py")
    text = LOGGING_EVALUATOR.format(inner=str(task / "evaluator.py"), log=str(out / "evaluations.jsonl"))
    path.write_text(text + (SHINKA_MAIN.format() if shinka else ""))
    return path


def run_qdevolve(a: argparse.Namespace) -> None:
    from qdevolve.db import LineageStore
    from qdevolve.evolve.core.engine import Evolution
    from qdevolve.evolve.setup.example import load_example

    ex = load_example(a.task)
    overrides = json.loads(a.qd_overrides or "{}")
    if isinstance(overrides.get("archive"), dict) and overrides["archive"].get("inner") == "$example":
        overrides["archive"] = {**overrides["archive"], "inner": ex.config.archive}  # islands of the example's archive
    cfg = ex.config.with_overrides(
        iterations=a.calls, workers=a.workers, max_pending=a.concurrency, seed=a.seed,
        mutation=[{"type": "rewrite", "weight": 1.0}], **overrides,
        backend={"type": "openai", "api_base": a.url, "model": "mutation-server", "timeout_s": 60, "retries": 2,
                 "concurrency": a.concurrency})
    store = LineageStore(a.out / "qd.sqlite")
    evo = Evolution.start(ex, cfg, store, progress=False)
    evo.run()
    evo.close()
    rows = store.execute("SELECT p.code, e.score FROM evaluations e JOIN programs p ON p.id = e.program_id")
    with (a.out / "evaluations.jsonl").open("w") as f:
        for code, score in rows:
            m = TAG.search(code or "")
            f.write(json.dumps({"call": int(m.group(1)) if m else 0, "score": score}) + "\n")


OE_CONFIG = """max_iterations: {n}
random_seed: {seed}
log_level: WARNING
diff_based_evolution: false
llm:
  api_base: "{url}"
  api_key: "mutation-server"
  models:
    - name: "mutation-server"
      weight: 1.0
  timeout: 60
  retries: 2
database:
  population_size: 500
  archive_size: 100
  num_islands: 5
  migration_interval: 50
  migration_rate: 0.1
  elite_selection_ratio: 0.1
  exploration_ratio: 0.3
  exploitation_ratio: 0.7
  feature_bins: 10
  random_seed: {seed}
prompt:
  num_top_programs: 3
  num_diverse_programs: 2
evaluator:
  timeout: 30
  cascade_evaluation: false
  parallel_evaluations: {concurrency}
"""


def run_openevolve(a: argparse.Namespace) -> None:
    from openevolve import OpenEvolve
    from openevolve.config import load_config

    cfg = a.out / "oe_config.yaml"
    cfg.write_text(OE_CONFIG.format(n=a.calls, seed=a.seed, url=a.url, concurrency=a.concurrency))
    evaluator = _write_evaluator(a.task, a.out)
    controller = OpenEvolve(str(a.task / "initial_program.py"), str(evaluator), load_config(str(cfg)),
                            output_dir=str(a.out / "oe_out"))
    asyncio.run(controller.run(iterations=a.calls))


def run_shinka(a: argparse.Namespace) -> None:
    import numpy as np
    from shinka.core import EvolutionConfig, ShinkaEvolveRunner
    from shinka.database import DatabaseConfig
    from shinka.launch import LocalJobConfig

    random.seed(a.seed)
    np.random.seed(a.seed)
    evaluate = _write_evaluator(a.task, a.out, shinka=True)
    seed_program = a.out / "initial.py"
    seed_program.write_text((a.task / "initial_program.py").read_text())
    evo = EvolutionConfig(
        patch_types=["full"], patch_type_probs=[1.0], num_generations=a.calls + 1, max_patch_resamples=3,
        max_patch_attempts=1,
        llm_models=[f"local/mutation-server@{a.url}"], llm_dynamic_selection=None,
        llm_kwargs={"temperatures": [0.7], "max_tokens": 4096}, meta_rec_interval=None, embedding_model=None,
        novelty_llm_models=None, init_program_path=str(seed_program), results_dir=str(a.out / "shinka"),
        language="python")
    job = LocalJobConfig(eval_program_path=str(evaluate), python_executable=sys.executable)
    db = DatabaseConfig(  # the island_medium preset, spelled out
        db_path=str(a.out / "shinka.sqlite"), num_islands=2, archive_size=40, elite_selection_ratio=0.3,
        num_archive_inspirations=1, num_top_k_inspirations=1, migration_interval=10, migration_rate=0.0,
        island_elitism=True, enforce_island_separation=True, parent_selection_strategy="weighted",
        parent_selection_lambda=10.0)
    runner = ShinkaEvolveRunner(evo, job, db, verbose=False, max_evaluation_jobs=a.workers,
                                max_proposal_jobs=a.concurrency, banner_style="minimal")
    runner.run()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("framework", choices=["qdevolve", "openevolve", "shinka"])
    ap.add_argument("--task", type=Path, required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--calls", type=int, required=True)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--qd-overrides", default="", help="JSON RunConfig overrides for qdevolve (ablations)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OPENAI_API_KEY", "mutation-server")
    os.environ.setdefault("LOCAL_OPENAI_API_KEY", "mutation-server")
    {"qdevolve": run_qdevolve, "openevolve": run_openevolve, "shinka": run_shinka}[a.framework](a)


if __name__ == "__main__":
    main()
