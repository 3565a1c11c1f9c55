"""``qdevolve train`` and ``qdevolve eval-policy``: the inner loop on a task, from the shell.

``train`` builds (or reuses) the task's tiny base policy unless ``--model DIR`` is given,
stores it as policy version 0, trains it with the chosen objective, and stores a version
every ``--save-every`` steps and at the end; every sampled group is written to the run's
``rollouts`` table. ``passk`` (binary rewards only) is trained on correctness (0/1). ``eval-policy`` samples ``--n`` completions per prompt from a stored
version and prints pass@k, D_n, answer entropy and, against version 0, support and prompt
changes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from qdevolve.cli._db import db_option, shown
from qdevolve.errors import ConfigError

__all__ = ["train", "eval_policy", "parse_kv"]


def parse_kv(items: tuple[str, ...], what: str) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; values are parsed as JSON when possible (numbers, true, lists)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"{what} expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def _load_model(task_name: str, model_dir: str | None, cache_dir: str | None, sft_steps: int | None, seed: int) -> tuple[Any, Any, str]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from qdevolve.backends.models import offline_hub, resolve_model
    from qdevolve.rl.tiny import tiny_policy_dir

    if model_dir is None:
        extra = {} if sft_steps is None else {"sft_steps": sft_steps}
        model_dir = str(tiny_policy_dir(task_name, cache_dir, seed=seed, **extra))
    model_dir = str(resolve_model(model_dir))
    with offline_hub():
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return model, tokenizer, model_dir


@click.command("train")
@click.option("--task", "task_name", required=True, help="Task: multi_answer, expr_dsl.")
@click.option("--objective", "objective_name", required=True, help="Objective plugin name (grpo, ips, es, ...).")
@click.option("--objective-arg", multiple=True, metavar="KEY=VALUE", help="Objective setting (repeatable).")
@click.option("--task-arg", multiple=True, metavar="KEY=VALUE", help="Task setting, e.g. candidates=3 (repeatable).")
@click.option("--trainer-arg", multiple=True, metavar="KEY=VALUE",
              help="TrainerConfig field, e.g. learning_rate=1e-3 beta=0.01 (repeatable; see docs/training.md).")
@click.option("--steps", type=int, required=True, help="Policy updates.")
@db_option(help="Lineage database, created if missing: a .sqlite path or a SQLAlchemy URL (default: $QDEVOLVE_DB).")
@click.option("--run-id", default=None, help="Run id (default: a new run).")
@click.option("--model", "model_dir", default=None, metavar="NAME|DIR",
              help="A known model (qdevolve models, e.g. smollm2-135m-instruct) or a local Hugging Face "
                   "directory (default: the task's tiny base policy).")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False), help="Tiny-policy cache directory.")
@click.option("--sft-steps", type=int, default=None, help="SFT steps when building the tiny base policy.")
@click.option("--prompts-per-step", type=int, default=8, show_default=True, help="Prompts per update.")
@click.option("--group-size", "G", type=int, default=8, show_default=True, help="Completions per prompt (G).")
@click.option("--outcome-key", default="outcome", show_default=True,
              type=click.Choice(["outcome", "semantic", "strategy"]), help="Task key used as outcome (ips).")
@click.option("--cluster-key", default="strategy", show_default=True,
              type=click.Choice(["outcome", "semantic", "strategy"]), help="Task key used as cluster (rare).")
@click.option("--save-every", type=int, default=0, help="Store a policy version every N steps (0: only at the end).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed.")
@click.option("--policy-dir", default=None, type=click.Path(file_okay=False),
              help="Where policy weights go (default: beside a .sqlite database; ./policies for a database URL).")
def train(task_name: str, objective_name: str, objective_arg: tuple[str, ...], task_arg: tuple[str, ...],
          trainer_arg: tuple[str, ...], steps: int, db: str, run_id: str | None, model_dir: str | None,
          cache_dir: str | None, sft_steps: int | None, prompts_per_step: int, G: int, outcome_key: str,
          cluster_key: str, save_every: int, seed: int, policy_dir: str | None) -> None:
    """Train a policy on a task with a diversity-preserving objective."""
    import torch
    from rich.console import Console

    from qdevolve import registry
    from qdevolve.db.store import LineageStore
    from qdevolve.rl.config import TrainerConfig
    from qdevolve.rl.tasks import get_task
    from qdevolve.rl.tasks.runner import train_on_task
    from qdevolve.rl.trainer import PolicyTrainer

    console = Console()
    torch.manual_seed(seed)
    task = get_task(task_name, **parse_kv(task_arg, "--task-arg"))
    objective = registry.objective.create({"type": objective_name, **parse_kv(objective_arg, "--objective-arg")})
    tcfg = {"max_completion_length": task.max_new_tokens, "seed": seed, **parse_kv(trainer_arg, "--trainer-arg")}
    config = TrainerConfig.from_dict(tcfg, where="--trainer-arg")
    model, tokenizer, model_dir = _load_model(task_name, model_dir, cache_dir, sft_steps, seed)
    store = LineageStore(db)

    def save(metrics: dict[str, Any]) -> int:
        """The next policy version; a server database keeps its weights under --policy-dir."""
        path = None
        if policy_dir is not None or store.path is None:
            nxt = 0 if trainer.version is None else trainer.version + 1
            path = Path(policy_dir or "policies") / run_id / f"v{nxt}"
        return trainer.save_version(metrics=metrics, path=path)

    if run_id is None or run_id not in {r["id"] for r in store.list_runs()}:
        run_id = store.create_run(name=f"train-{task_name}-{objective_name}", run_id=run_id, seed=seed, config={
            "task": task_name, "objective": objective_name, "objective_args": parse_kv(objective_arg, "x"),
            "task_args": parse_kv(task_arg, "x"), "trainer": tcfg, "model": model_dir})
        trainer = PolicyTrainer(model, tokenizer, objective, config, store=store, run_id=run_id)
        save({"step": 0})
    else:
        trainer = PolicyTrainer.from_store(store, run_id, objective, config)
    store.set_state(run_id, "task", {"name": task_name, "args": parse_kv(task_arg, "x")})

    def report(step: int, stats: dict[str, float]) -> None:
        if (step + 1) % max(1, steps // 10) == 0 or step == steps - 1:
            keys = ("reward_mean", "loss", "kl", "entropy", "clip_fraction")
            console.print(f"step {trainer.global_step}: " + "  ".join(f"{k}={stats[k]:.4g}" for k in keys if k in stats))
        if save_every and (step + 1) % save_every == 0 and step != steps - 1:
            save(stats)

    history = train_on_task(task, trainer, steps=steps, prompts_per_step=prompts_per_step, G=G, seed=seed,
                            outcome_key=outcome_key, cluster_key=cluster_key, temperature=config.temperature,
                            binary=objective_name == "passk", callback=report)
    version = save(history[-1] if history else {})
    console.print(f"run {run_id}: stored policy version {version} (step {trainer.global_step}) in {shown(db)}",
                  markup=False, highlight=False)


@click.command("eval-policy")
@click.option("--task", "task_name", required=True, help="Task the policy was trained on.")
@db_option(required=False, help="Lineage database holding the run's policy versions (not needed with --model).")
@click.option("--model", "model_spec", default=None, metavar="NAME|DIR",
              help="Evaluate this model instead of a stored version: a known model (qdevolve models) or a "
                   "local Hugging Face directory.")
@click.option("--run-id", default=None, help="Run id (default: the latest run).")
@click.option("--policy-version", "version", type=int, default=None, help="Version (default: the latest).")
@click.option("--task-arg", multiple=True, metavar="KEY=VALUE", help="Task setting (repeatable).")
@click.option("--k", "ks", default="1,4,16,64,256", show_default=True, help="Comma-separated k values.")
@click.option("--n", type=int, default=256, show_default=True, help="Samples per prompt.")
@click.option("--split", default="train", type=click.Choice(["train", "test"]), show_default=True, help="Prompt split.")
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed.")
def eval_policy(task_name: str, db: str | None, model_spec: str | None, run_id: str | None, version: int | None,
                task_arg: tuple[str, ...], ks: str, n: int, split: str, seed: int) -> None:
    """Evaluate a stored policy version (or, with --model, any model): pass@k, D_n, entropy,
    support vs version 0."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from qdevolve.db.store import open_store
    from qdevolve.rl.tasks import get_task
    from qdevolve.rl.tasks.runner import evaluate_policy, summarize

    try:
        k_values = sorted({int(k) for k in ks.split(",") if k.strip()})
    except ValueError as exc:
        raise ConfigError(f"--k expects comma-separated integers, got {ks!r}") from exc
    if not k_values or min(k_values) < 1 or max(k_values) > n:
        raise ConfigError(f"--k values must lie in [1, --n={n}], got {ks!r}")
    task = get_task(task_name, **parse_kv(task_arg, "--task-arg"))
    prompts = task.prompts(split)
    if model_spec is not None:
        if db is not None or run_id is not None or version is not None:
            raise ConfigError("--model evaluates a model, not a stored version: drop --db/--run-id/--policy-version")
        model, tok, path = _load_model(task_name, model_spec, None, None, seed)
        res = summarize(evaluate_policy(task, model, tok, prompts, n=n, seed=seed), ks=k_values)
        _print_eval(f"{task_name}: {model_spec} ({path}), {len(prompts)} prompts, n={n}", res, None, "model")
        return
    if db is None:
        raise ConfigError("eval-policy needs --db (a run's policy versions) or --model NAME|DIR")
    store = open_store(db)
    run_id = store.resolve_run(run_id)
    rows = {r["version"]: r for r in store.policy_versions(run_id)}
    if not rows:
        raise ConfigError(f"run {run_id} in {shown(db)} has no policy versions; train one with qdevolve train")
    version = max(rows) if version is None else version
    if version not in rows:
        raise ConfigError(f"run {run_id} has no policy version {version}; versions: {', '.join(map(str, sorted(rows)))}")

    def run(v: int) -> Any:
        model = AutoModelForCausalLM.from_pretrained(rows[v]["path"], dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(rows[v]["path"])
        return evaluate_policy(task, model, tok, prompts, n=n, seed=seed)

    evals = run(version)
    base = run(0) if 0 in rows and version != 0 else None
    res = summarize(evals, base, ks=k_values)
    base_res = summarize(base, ks=k_values) if base is not None else None
    _print_eval(f"{task_name}: run {run_id[:8]} policy v{version} ({rows[version]['objective']}, "
                f"step {rows[version]['step']}), {len(prompts)} prompts, n={n}", res, base_res, f"v{version}")


def _print_eval(title: str, res: dict[str, float], base_res: dict[str, float] | None, column: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column(column, justify="right")
    if base_res is not None:
        table.add_column("v0 (base)", justify="right")
    for key, value in res.items():
        row = [key, f"{value:.4g}"]
        if base_res is not None:
            row.append(f"{base_res[key]:.4g}" if key in base_res else "")
        table.add_row(*row)
    Console().print(table)
