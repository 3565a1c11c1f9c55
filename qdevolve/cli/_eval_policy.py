"""``qdevolve eval-policy``'s work: score several stored policy versions, each base once.

A *selection* (task, split, samples, seed, k values, which versions) is applied to every
run named. Versions are scored in order; a run's base (version 0) is scored once and shared
by every run built from the same model (``config["model"]`` of a ``train`` run, or the
``train`` section's policy, task and base seed of a joined run). The report is a plain dict
(the ``--json`` output); its rows are stored with their versions through
:meth:`~qdevolve.db.store.LineageStore.record_policy_eval` under the selection's key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from qdevolve.cli._db import shown
from qdevolve.errors import ConfigError

__all__ = ["Selection", "evaluate_versions", "print_table"]


@dataclass(frozen=True, kw_only=True)
class Selection:
    """What to score: the task and sampling settings, and which versions of each run."""

    task: str
    task_args: dict[str, Any]
    ks: list[int]
    n: int
    split: str
    seed: int
    versions: list[int] | None = None  # None: the latest (or every one with all_versions)
    all_versions: bool = False

    @property
    def key(self) -> str:
        """The name the results are stored under (a re-run with the same settings replaces them)."""
        args = ",".join(f"{k}={v}" for k, v in sorted(self.task_args.items()))
        return f"{self.task}{'(' + args + ')' if args else ''}/{self.split}/n={self.n}/seed={self.seed}"


def _base_identity(run: dict[str, Any]) -> str:
    config = run.get("config") or {}
    if config.get("model"):
        return f"model:{config['model']}"
    train = config.get("train") if isinstance(config.get("train"), dict) else None
    if train:
        return "train:" + json.dumps([train.get("policy", "tiny"), train.get("task"), train.get("base_seed", 0)])
    return f"run:{run['id']}"


def _chosen(rows: dict[int, dict[str, Any]], sel: Selection, run_id: str) -> list[int]:
    if sel.all_versions:
        return sorted(rows)
    if sel.versions is None:
        return [max(rows)]
    missing = [v for v in sel.versions if v not in rows]
    if missing:
        raise ConfigError(f"run {run_id[:12]} has no policy version(s) {', '.join(f'v{v}' for v in missing)}; "
                          f"versions: {', '.join(f'v{v}' for v in sorted(rows))}")
    return list(sel.versions)


def evaluate_versions(db: str, run_ids: tuple[str, ...], sel: Selection, *, store_results: bool = True) -> dict[str, Any]:
    """Score the selected versions of ``run_ids`` (default: the latest run); the report dict."""
    from qdevolve.backends.transformers_backend import quiet_transformers
    from qdevolve.db.store import open_store
    from qdevolve.progress import phase
    from qdevolve.rl.checkpoints import load_version
    from qdevolve.rl.tasks import get_task
    from qdevolve.rl.tasks.runner import evaluate_policy, summarize

    quiet_transformers()
    store = open_store(db)
    task = get_task(sel.task, **sel.task_args)
    prompts = task.prompts(sel.split)
    plan: list[tuple[str, dict[int, dict[str, Any]], list[int], str]] = []
    for rid in run_ids or (None,):
        run_id = store.resolve_run(rid)
        rows = {r["version"]: r for r in store.policy_versions(run_id)}
        if not rows:
            raise ConfigError(f"run {run_id} in {shown(db)} has no policy versions; train one with qdevolve train")
        plan.append((run_id, rows, _chosen(rows, sel, run_id), _base_identity(store.get_run(run_id))))

    def score(run_id: str, version: int) -> Any:
        """Either kind of version: a full directory, or an adapter over its recorded base."""
        loaded = load_version(store, run_id, version)
        return evaluate_policy(task, loaded.model.eval(), loaded.tokenizer, prompts, n=sel.n, seed=sel.seed)

    bases: dict[str, tuple[str, Any]] = {}  # identity -> (run id whose v0 was scored, evaluations)
    report: dict[str, Any] = {"task": sel.task, "task_args": sel.task_args, "split": sel.split, "n": sel.n,
                              "seed": sel.seed, "ks": sel.ks, "prompts": len(prompts), "key": sel.key,
                              "versions": []}
    base_ids = {identity for _, rows, _, identity in plan if 0 in rows}  # each base scored once
    todo = len(base_ids) + sum(sum(v != 0 for v in chosen) for _, _, chosen, _ in plan)
    done = 0
    with phase(f"scoring {todo} policy version(s) on {len(prompts)} {sel.task} prompts, n={sel.n}",
               total=todo) as advance:
        for run_id, rows, chosen, identity in plan:
            if identity not in bases and 0 in rows:
                bases[identity] = (run_id, score(run_id, 0))
                done += 1
                advance(done)
                report["versions"].append(_row(run_id, rows[0], summarize(bases[identity][1], ks=sel.ks),
                                               base_of=identity))
            base = bases.get(identity)
            for v in chosen:
                if v == 0 and base is not None and base[0] == run_id:
                    continue  # already scored (and reported) as this run's base
                if v == 0 and base is not None:
                    continue  # the same base as an earlier run's: scored once
                evals = score(run_id, v)
                done += 1
                advance(done)
                metrics = summarize(evals, base[1] if base is not None else None, ks=sel.ks)
                report["versions"].append(_row(run_id, rows[v], metrics, compared_with=base[0] if base else None))
    if store_results:
        for row in report["versions"]:
            store.record_policy_eval(row["run_id"], row["version"], sel.key,
                                     {"metrics": row["metrics"], "prompts": len(prompts), "ks": sel.ks})
    store.close()
    return report


def _row(run_id: str, version_row: dict[str, Any], metrics: dict[str, float], *, base_of: str | None = None,
         compared_with: str | None = None) -> dict[str, Any]:
    out = {"run_id": run_id, "version": version_row["version"], "objective": version_row.get("objective"),
           "step": version_row.get("step"), "metrics": metrics}
    if base_of is not None:
        out["base"] = True
    if compared_with is not None:
        out["base_run_id"] = compared_with
    return out


def print_table(report: dict[str, Any]) -> None:
    """One column per scored version (bases marked), one row per metric."""
    from rich.console import Console
    from rich.table import Table

    from qdevolve.textsafe import terminal_safe_line

    rows = report["versions"]
    table = Table(title=f"{report['task']} ({report['split']}): {report['prompts']} prompts, n={report['n']}, "
                        f"seed {report['seed']}")
    table.add_column("metric")
    several_runs = len({r["run_id"] for r in rows}) > 1
    for r in rows:
        name = f"{r['run_id'][:8]} " if several_runs else ""
        label = f"{name}v{r['version']}" + (" (base)" if r.get("base") else f" {r['objective'] or ''}")
        table.add_column(terminal_safe_line(label), justify="right")
    keys = list(dict.fromkeys(k for r in rows for k in r["metrics"]))
    for key in keys:
        table.add_row(key, *[f"{r['metrics'][key]:.4g}" if key in r["metrics"] else "" for r in rows])
    Console().print(table)
