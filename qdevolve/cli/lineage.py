"""``qdevolve lineage``: tree, show, ancestry, diff, export and policy views of a run.

Every command opens the database read-only in spirit (``open_store(target)``, never creating
it) and accepts unique id prefixes. ``tree`` fetches one level at a time (the top-K children
of every node of the level in one ranked query) on a small run or from ``--root``, and the
whole run in one pass of plain scans on a large one, and prints plain text in blocks;
``export`` streams from the same scans. On a SQLite file those two whole-run reads go
through a plain ``sqlite3`` view (:mod:`qdevolve.db._view`), so SQLAlchemy is never imported.

Stored text (code, artifacts, names, operators, errors) was written by candidates and
models: every view prints it through :mod:`qdevolve.textsafe`, so no control sequence or
bidi override reaches the terminal.
"""

from __future__ import annotations

import difflib
import json
from typing import TYPE_CHECKING, Any

import click

from qdevolve.cli._db import db_option
from qdevolve.cli._task_table import task_table_lines
from qdevolve.cli._tree_labels import _safe, label_of, labels
from qdevolve.db._scans import quiet_gc
from qdevolve.db._tree import TREE_KEYS, Node, run_tree
from qdevolve.db._view import open_view
from qdevolve.db._xmltext import EXPORT_FORMATS
from qdevolve.programtree import file_pairs
from qdevolve.textsafe import terminal_safe
from qdevolve.types import HELDOUT_PREFIX, task_scores

if TYPE_CHECKING:
    from qdevolve.db.store import LineageStore

__all__ = ["lineage"]


def open_store(target: str) -> LineageStore:
    """The store (imported here: ``tree`` and ``export`` on a SQLite file read through a plain
    ``sqlite3`` view, :func:`qdevolve.db._view.open_view`, and never import SQLAlchemy)."""
    from qdevolve.db.store import open_store as open_

    return open_(target)


_DB = db_option()


_RUN = click.option("--run", "run_id", default=None, help="Run id or unique prefix (default: the latest run).")


def _score(v: float | None) -> str:
    return "-" if v is None else f"{v:.6g}"


def _tuple(node: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(node[k] for k in TREE_KEYS)


@click.group()
def lineage() -> None:
    """Inspect lineage trees: tree, show, ancestry, diff, export, policy, templates."""


@lineage.command()
@_DB
@_RUN
@click.option("--root", "root", default=None, help="Start from this program (id or prefix) instead of the seeds.")
@click.option("--depth", type=click.IntRange(0, 50), default=3, show_default=True,
              help="Levels of children to show below each root.")
@click.option("--top", "top", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Children shown per node (best score first); the rest become '... N more'.")
@click.option("--label", type=click.Choice(["score", "operator", "policy_version"]), default="score",
              show_default=True, help="What each node shows first.")
def tree(db: str, run_id: str | None, root: str | None, depth: int, top: int, label: str) -> None:
    """A run's lineage tree, depth- and top-K-bounded."""
    view = None if root else open_view(db)
    if view is not None:  # a SQLite file: a large run is read in one pass without the store
        with view:
            rid = view.resolve_run(run_id)
            n_programs = view.count_programs(rid)
            if n_programs > _WIDE:
                starts, _ = run_tree(view, rid, lambda rows, evs: labels(rows, evs, label), _LABEL_COLUMNS)
                head = f"run {_safe(rid[:12])} ({_safe(view.get_run(rid)['name'])}): {n_programs} programs"
                _print_tree(head, starts, len(starts), depth, top)
                return
    from qdevolve.db import lineage as L

    with open_store(db) as store:
        if root:
            node = next(iter(L.nodes(store, [store.get_program(root).id]).values()))
            found, total, rid = [_tuple(node)], 1, node["run_id"]
        else:
            rid = store.resolve_run(run_id)
        run, n_programs = store.get_run(rid), store.count_programs(rid)
        if not root and n_programs > _WIDE:  # a large run: one pass gives the roots and every level
            starts, _ = run_tree(store, rid, lambda rows, evs: labels(rows, evs, label), _LABEL_COLUMNS)
            total = len(starts)
        else:
            if not root:
                seeds, total = L.roots(store, rid, top)
                found = [_tuple(s) for s in seeds]
            starts = _link(found, *_levels(store, rid, found, depth, top, label), label)
        head = f"run {_safe(rid[:12])} ({_safe(run['name'])}): {n_programs} programs"
    _print_tree(head, starts, total, depth, top)


def _print_tree(head: str, starts: list[Node], total: int, depth: int, top: int) -> None:
    lines = _Lines()
    lines.append(head)
    with quiet_gc():  # the walk allocates a line per node: no collection walks the whole run's nodes
        _walk(lines, starts[:top], total - len(starts[:top]), depth, top)
    lines.flush()


class _Lines:
    """Lines printed in blocks as the tree is walked (a 200,000-line tree is never held whole)."""

    def __init__(self, block: int = 8192) -> None:
        self.buf: list[str] = []
        self.block = block

    def append(self, line: str) -> None:
        self.buf.append(line)
        if len(self.buf) >= self.block:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            click.echo("\n".join(self.buf))
            self.buf.clear()


_LABEL_COLUMNS = "id, generation, operator, policy_version, NULL"  # COLUMNS without the island: no label shows it
_WIDE = 2000  # a level with more parents than this: read the whole run in one pass instead


def _levels(store: LineageStore, run_id: str, starts: list[tuple[Any, ...]], depth: int, top: int,
            label: str) -> tuple[dict[str, tuple[list[tuple[Any, ...]], int]], dict[str, Node]]:
    """Top-``top`` children of every node within ``depth`` levels: one ranked query per
    level (per 500 parents) while levels are narrow; once a level is wide, the whole run in
    one pass (its nodes, returned second, then serve the levels below)."""
    from qdevolve.db import streams

    kids: dict[str, tuple[list[tuple[Any, ...]], int]] = {}
    frontier = [s[0] for s in starts]
    for _ in range(depth):
        todo = [pid for pid in dict.fromkeys(frontier) if pid not in kids]
        if not todo:
            break
        if len(todo) > _WIDE:
            return kids, run_tree(store, run_id, lambda rows, evs: labels(rows, evs, label), _LABEL_COLUMNS)[1]
        for pid, (items, n) in streams.children_of(store, todo, top).items():
            kids[pid] = ([_tuple(k) for k in items], n)
        frontier = [k[0] for pid in todo for k in kids[pid][0]]
    last = [pid for pid in dict.fromkeys(frontier) if pid not in kids]
    for pid, (_items, n) in streams.children_of(store, last, 1).items():  # the cut level: counts only
        kids[pid] = ([], n)
    return kids, {}


def _link(starts: list[tuple[Any, ...]], kids: dict[str, tuple[list[tuple[Any, ...]], int]],
          whole: dict[str, Node], label: str) -> list[Node]:
    """Tree nodes for :func:`_walk` from level-by-level children (which take precedence) over
    the nodes of a whole-run pass; returns the nodes of ``starts``."""
    nodes = whole
    for t in [*starts, *(k for items, _ in kids.values() for k in items)]:
        if t[0] not in nodes:
            nodes[t[0]] = [label_of(t, label), None, 0, t[0]]
    for pid, (items, total) in kids.items():
        node = nodes.get(pid)
        if node is not None:
            node[1], node[2] = [nodes[k[0]] for k in items] or None, total - len(items)
    return [nodes[s[0]] for s in starts]


def _walk(lines: _Lines, roots: list[Node], more_roots: int, depth: int, top: int) -> None:
    """Append the tree below ``roots`` with guides (``├──``, ``└──``, ``│``): up to ``top``
    children per node, ``depth`` levels; a node already on the path above it (a cycle in a
    tampered database) is shown but not expanded."""
    buf, path = lines.buf, set()
    app = buf.append

    def grow(shown: list[Node], more: int, inner: str, level: int, rest: str) -> None:
        mid, deeper, last = inner + "├── ", inner + "│   ", len(shown) - 1 if more <= 0 else -1
        for i, node in enumerate(shown):
            if i == last:
                app(inner + "└── " + node[0])
                below = inner + "    "
            else:
                app(mid + node[0])
                below = deeper
            kids = node[1]
            if kids is not None and level < depth and node[3] not in path:
                pid = node[3]
                path.add(pid)
                n = len(kids)
                grow(kids if n <= top else kids[:top], max(n - top, 0) + node[2], below, level + 1, " more")
                path.discard(pid)
                if len(buf) >= lines.block:
                    lines.flush()
            elif level >= depth and (cut := len(kids or ()) + node[2]) > 0:  # the tree stops here: say so
                app(f"{below}└── ... +{cut} {'child' if cut == 1 else 'children'} below, cut at --depth {depth} "
                    f"(--depth {depth + 1} or --root {node[3][:12]} shows them)")
        if more > 0:
            app(f"{inner}└── ... {more}{rest}")

    grow(roots, more_roots, "", 0, " more roots")


def _print_kv(title: str, d: dict[str, Any]) -> None:
    click.echo(f"{title}:")
    if not d:
        click.echo("  (none)")
    for k, v in d.items():
        if isinstance(v, str) and "\n" in v:
            click.echo(f"  {_safe(k)}:")
            for line in terminal_safe(v).rstrip("\n").split("\n"):
                click.echo(f"    {line}")
        else:
            click.echo(f"  {_safe(k)}: {_safe(v)}")


def _diff(a_code: str, b_code: str, a_name: str, b_name: str) -> str:
    """A unified diff; of two program trees, one per file (``<id>/<path>``), unchanged files left out."""
    return "".join(
        "".join(difflib.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True),
                                     fromfile=f"{a_name}/{path}" if path else a_name,
                                     tofile=f"{b_name}/{path}" if path else b_name))
        for path, a, b in file_pairs(a_code, b_code))


@lineage.command()
@click.argument("program_id")
@_DB
def show(program_id: str, db: str) -> None:
    """A program: code, status, score, metrics, artifacts and its diff against its first parent.

    An agent (operator ``self``, or metrics naming ``heldout/<task>``) gets its per-task
    scores as two tables, scoring and held-out tasks, beside its parent's."""
    with open_store(db) as store:
        p = store.get_program(program_id)
        r = store.get_evaluation(p.id)
        parent = store.get_program(p.parent_ids[0]) if p.parent_ids else None
        parent_r = store.get_evaluation(parent.id) if parent is not None else None
        worker = store.latest_worker(p.id)
    click.echo(f"program   {_safe(p.id)}")
    click.echo(f"run       {_safe(p.run_id)}")
    click.echo(f"parents   {_safe(', '.join(p.parent_ids)) or '(seed)'}")
    click.echo(f"operator  {_safe(p.operator)}   generation {p.generation}   island {p.island}   "
               f"policy version {'-' if p.policy_version is None else p.policy_version}")
    if worker:
        click.echo(f"worker    {_safe(worker)}")
    if isinstance(p.metadata.get("template_id"), str):  # evolving prompts: 'lineage templates --show ID'
        click.echo(f"template  {_safe(p.metadata['template_id'])}")
    if r is None:
        click.echo("status    unevaluated")
    else:
        click.echo(f"status    {_safe(r.status)}" + (f"   error: {_safe(r.error)}" if r.error else ""))
        click.echo(f"score     {_score(r.score)}   runtime {r.runtime_s:.3g}s")
        tasks = task_scores(r.metrics, p.operator)
        if tasks is None or not (tasks[0] or tasks[1]):
            _print_kv("metrics", r.metrics)
        else:
            named = set(tasks[0]) | {HELDOUT_PREFIX + k for k in tasks[1]}
            other = {k: v for k, v in r.metrics.items() if k not in named}
            if other:
                _print_kv("metrics", other)
            parent_tasks = task_scores(parent_r.metrics, "self") if parent_r is not None else None
            for line in task_table_lines(tasks, parent_tasks):
                click.echo(line)
        if r.features:
            _print_kv("features", r.features)
        _print_kv("artifacts", r.artifacts)
    click.echo("code:")
    click.echo(terminal_safe(p.code.rstrip("\n")))
    if parent is not None:
        what = "self-modification: diff against parent" if p.operator == "self" else "diff against first parent"
        click.echo(f"{what} {_safe(parent.id)}:")
        click.echo(terminal_safe(_diff(parent.code, p.code, parent.id[:12], p.id[:12]).rstrip("\n"))
                   or "(identical code)")


def _rows_table(title: str, rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left")
    for col in ("depth", "id", "gen", "operator", "policy", "status", "score", "parents"):
        table.add_column(col, justify="right" if col in ("depth", "gen", "score") else "left")
    for r in rows:
        table.add_row(str(r["depth"]), Text(_safe(r["id"][:12])), str(r["generation"]),
                      Text(_safe(r["operator"])),
                      "-" if r["policy_version"] is None else str(r["policy_version"]),
                      Text(_safe(r["status"] or "unevaluated")), _score(r["score"]),
                      Text(_safe(", ".join(x[:8] for x in r["parent_ids"]))))
    Console(width=max(120, Console().width)).print(table)


def _dump(rows: Any) -> None:
    click.echo(json.dumps(rows, indent=2))


@lineage.command()
@click.argument("program_id")
@_DB
@click.option("--json", "as_json", is_flag=True, help="Print JSON rows.")
def ancestry(program_id: str, db: str, as_json: bool) -> None:
    """A program and all its ancestors (recursive SQL; the run is never loaded)."""
    from qdevolve.db import lineage as L

    with open_store(db) as store:
        rows = L.ancestry(store, program_id)
    if as_json:
        _dump(rows)
    else:
        _rows_table(f"ancestry of {_safe(rows[0]['id'])} ({len(rows) - 1} ancestors)", rows)


@lineage.command()
@click.argument("a")
@click.argument("b")
@_DB
def diff(a: str, b: str, db: str) -> None:
    """Unified diff between two programs' code."""
    with open_store(db) as store:
        pa, pb = store.get_program(a), store.get_program(b)
    click.echo(terminal_safe(_diff(pa.code, pb.code, pa.id, pb.id).rstrip("\n")) or "(identical code)")


@lineage.command()
@_DB
@_RUN
@click.option("--format", "fmt", type=click.Choice(list(EXPORT_FORMATS)), default="graphml", show_default=True)
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False, writable=True),
              help="File to write.")
def export(db: str, run_id: str | None, fmt: str, out: str) -> None:
    """Export a run's lineage graph as GraphML, node-link JSON or DOT (streamed)."""
    from qdevolve.db._export import export_run

    view = open_view(db)
    if view is not None:  # a SQLite file: read without the store
        with view:
            n_nodes, n_edges = export_run(view, run_id, out, fmt)
    else:
        with open_store(db) as store:
            n_nodes, n_edges = export_run(store, run_id, out, fmt)
    click.echo(f"wrote {n_nodes} programs and {n_edges} edges to {_safe(out)} ({fmt})")


_POLICY_METRICS = {
    "loss": ("loss", "train/loss"),
    "kl": ("kl", "kl_div", "train/kl"),
    "entropy": ("entropy", "train/entropy"),
    "D_n": ("D_n", "d_n", "Dn", "diversity", "distinct_n"),
}


def _metric(metrics: dict[str, Any], name: str) -> Any:
    for key in _POLICY_METRICS[name]:
        if key in metrics:
            return metrics[key]
    return None


@lineage.command()
@_DB
@_RUN
@click.option("--json", "as_json", is_flag=True, help="Print JSON rows.")
def policy(db: str, run_id: str | None, as_json: bool) -> None:
    """Policy versions of a run: objective, loss, KL, entropy, D_n."""
    with open_store(db) as store:
        rid = store.resolve_run(run_id)
        versions = store.policy_versions(rid)
        n_programs = store.programs_per_policy(rid)
    rows = [{"version": v["version"], "parent_version": v["parent_version"], "objective": v["objective"],
             "step": v["step"], "programs": n_programs.get(v["version"], 0),
             **{m: _metric(v["metrics"], m) for m in _POLICY_METRICS}, "path": v["path"]}
            for v in versions]
    if as_json:
        _dump(rows)
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    if not rows:
        click.echo(f"run {_safe(rid)}: no policy versions recorded (the run used no trainable policy)")
        return
    table = Table(title=f"policy versions of run {_safe(rid[:12])}", title_justify="left")
    for col in ("version", "parent", "objective", "step", "programs", "loss", "kl", "entropy", "D_n"):
        table.add_column(col, justify="left" if col == "objective" else "right")
    fmt = lambda v: "-" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))  # noqa: E731
    for r in rows:
        table.add_row(str(r["version"]), fmt(r["parent_version"]), Text(_safe(r["objective"] or "-")), str(r["step"]),
                      str(r["programs"]), fmt(r["loss"]), fmt(r["kl"]), fmt(r["entropy"]), fmt(r["D_n"]))
    Console(width=max(100, Console().width)).print(table)


def _add_templates() -> None:
    from qdevolve.cli.lineage_templates import templates

    lineage.add_command(templates)


_add_templates()
