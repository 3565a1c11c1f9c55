"""``qdevolve archive stats|plot``: a run's archive, rebuilt from its database.

Both commands open the store, take the run's archive spec from its stored config
(``config["archive"]``, default ``{"type": "map_elites"}``), load the run's recorded plugin
files that still exist, and replay ``add`` over every evaluated program in the order the
engine added them, i.e. by evaluation id (:func:`qdevolve.db.streams.replay_stream`,
:func:`qdevolve.archive.replay.replay`), so what they show is exactly the archive the engine had.
The replay streams light rows (no code unless a code-based feature needs it, no metrics or
artifacts). ``stats`` starts from the newest archive snapshot the engine stored with the run
(:mod:`qdevolve.db.snapshots`) and replays only the evaluations after it, so a
200,000-program run takes about two seconds; ``plot`` (which draws the history) and runs
without a snapshot replay everything. Stored names are printed through :mod:`qdevolve.textsafe`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

from qdevolve.archive.replay import Replay
from qdevolve.cli._db import db_option, shown
from qdevolve.cli.plugins import load_plugins, plugin_option
from qdevolve.db.store import LineageStore, open_store
from qdevolve.errors import ConfigError
from qdevolve.evolve.core import (
    rebuild,
)
from qdevolve.textsafe import terminal_safe_line as _safe
from qdevolve.types import EvalResult, Program

__all__ = ["archive", "rebuild", "replay_rows"]

RUN_HELP = "Run id or unique prefix (default: the latest run)."
ARCHIVE_PLUGIN_HELP = ("A plugin .py file (repeatable) defining the run's archive or feature plugins, e.g. where "
                       "the file the run recorded has moved.")


def replay_rows(store: LineageStore, run_id: str) -> list[tuple[int, Program, EvalResult | None]]:
    """The run's ``(seq, program, latest evaluation)`` rows in the order the engine added them.

    With several workers evaluations finish out of program order and the engine calls
    ``archive.add`` as each one finishes, so the replay follows the id of each program's
    latest evaluation (programs without one come last, in program order).
    """
    rows: list[tuple[int, Program, EvalResult | None]] = list(store.iter_evaluated(run_id))
    rows += [(0, p, None) for p in store.unevaluated(run_id)]
    return rows


def _fmt(v: Any, digits: int = 6) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def by_worker(store: LineageStore, run_id: str) -> dict[str, int] | None:
    """Evaluations per worker (``evaluations.worker``), counted in the database; ``None`` on
    schemas without the column."""
    return store.evaluations_by_worker(run_id)


def _summary(run: dict[str, Any], rep: Replay, workers: dict[str, int] | None = None) -> dict[str, Any]:
    stats = rep.archive.stats()
    return {
        "run_id": run["id"],
        "run_name": run.get("name"),
        "archive_spec": (run.get("config") or {}).get("archive") or {"type": "map_elites"},
        "programs": rep.programs,
        "evaluations": rep.evaluated,
        "unevaluated": rep.programs - rep.evaluated,
        "by_status": dict(sorted(rep.by_status.items())),
        "events": dict(sorted(rep.events.items())),
        "stats": stats,
        **({"by_worker": workers} if workers is not None else {}),
    }


@click.group()
def archive() -> None:
    """Archive statistics and plots (the archive is rebuilt from the database)."""


@archive.command("stats")
@db_option()
@click.option("--run", "run_id", default=None, help=RUN_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@plugin_option(ARCHIVE_PLUGIN_HELP)
def stats_cmd(db: str, run_id: str | None, as_json: bool, plugins: tuple[Path, ...]) -> None:
    """QD-score, coverage, best score, size, per-island stats and evaluations by status."""
    load_plugins(plugins)
    with open_store(db) as store:
        run, rep = rebuild(store, run_id, points=1)
        workers = by_worker(store, run["id"])
    summary = _summary(run, rep, workers)
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=float))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    s = summary["stats"]
    console = Console(width=max(100, Console().width))
    t = Table(title=Text(f"archive of run {_safe(run['id'][:12])} ({_safe(run.get('name'))}) "
                         f"in {shown(db)}"), title_justify="left", show_header=False)
    t.add_column("metric")
    t.add_column("value", justify="left")
    rows = [
        ("archive", json.dumps(summary["archive_spec"])),
        ("programs", _fmt(rep.programs)),
        ("evaluations", _fmt(rep.evaluated)),
        ("by status", ", ".join(f"{k} {v}" for k, v in summary["by_status"].items()) or "-"),
        ("unevaluated", _fmt(summary["unevaluated"])),
        ("elites (size)", _fmt(s["size"])),
        ("cells", _fmt(s.get("cells"))),
        ("coverage", f"{100 * s['coverage']:.2f} %"),
        (f"QD-score (offset {_fmt(s.get('qd_offset', 0.0))})", _fmt(s["qd_score"])),
        ("best score", _fmt(s["best_score"])),
        ("best program", _fmt(s["best_program_id"])),
    ]
    if "migrations" in s:
        rows.append(("migrations", _fmt(s["migrations"])))
    if workers:
        top = list(workers.items())[:5]
        rest = len(workers) - len(top)
        rows.append((f"workers ({len(workers)})", ", ".join(f"{w} {n}" for w, n in top)
                     + (f", ... {rest} more" if rest > 0 else "")))
    for k, v in rows:
        t.add_row(Text(_safe(k)), Text(_safe(v)))
    console.print(t)
    if s.get("islands"):
        it = Table(title="islands", title_justify="left")
        for col in ("island", "size", "coverage", "QD-score", "best score", "best program", "offered"):
            it.add_column(col, justify="left" if col == "best program" else "right")
        for isl in s["islands"]:
            it.add_row(str(isl["island"]), str(isl["size"]), f"{100 * isl['coverage']:.2f} %",
                       _fmt(isl["qd_score"]), _fmt(isl["best_score"]),
                       Text(_safe((isl["best_program_id"] or "-")[:12])), str(isl.get("offered", "-")))
        console.print(it)
    from qdevolve.evolve.report import front_tables

    for front in front_tables(s):  # a pareto archive's front (per island)
        console.print(front)


def _grid_matrix(arc: Any) -> tuple[Any, list[str], tuple[float, float, float, float] | None] | None:
    """Best score per cell of a 2-D grid (merged over islands) with the feature names and the
    grid's extent in feature units ``(x_lo, x_hi, y_lo, y_hi)`` (``None`` when the ranges are
    not known yet), or ``None`` when the archive is not a 2-D grid."""
    import numpy as np

    inner = getattr(arc, "islands", None) or [arc]
    first = inner[0]
    bins = getattr(first, "bins", None)
    if bins is None or getattr(first, "centroids", None) is not None or len(first.feature_dimensions) != 2:
        return None
    b = [int(x) for x in bins]
    mat = np.full((b[1], b[0]), np.nan)
    for a in inner:
        for e in a.elites():
            if not e.cell or "," not in e.cell:
                continue
            i, j = (int(x) for x in e.cell.split(","))
            if np.isnan(mat[j, i]) or e.score > mat[j, i]:
                mat[j, i] = e.score
    extent = None
    ranges = getattr(first, "ranges", None)
    if ranges is not None:
        lo, hi = np.asarray(ranges.lo, dtype=float), np.asarray(ranges.hi, dtype=float)
        if np.isfinite(lo).all() and np.isfinite(hi).all() and (hi > lo).all():
            extent = (float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1]))
    return mat, list(first.feature_dimensions), extent


def _colorbar(fig: Any, ax: Any, mappable: Any, values: Any, label: str) -> Any:
    """A colour bar whose ticks read the scores themselves (no offset such as ``+1.6``) and
    whose label gives the lowest and highest value; when
    every value is the same, one tick at that value and a label that says so, rather than a
    made-up range around it."""
    import numpy as np
    from matplotlib.ticker import ScalarFormatter

    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size and v.min() == v.max():
        x = float(v[0])
        pad = max(abs(x), 1.0) * 0.05
        mappable.set_clim(x - pad, x + pad)
        bar = fig.colorbar(mappable, ax=ax, ticks=[x], label=f"{label} (every value is {x:.6g})")
        bar.ax.set_yticklabels([f"{x:.6g}"])
        return bar
    span = ""
    if v.size:
        lo, hi = float(v.min()), float(v.max())
        digits = min(12, max(4, math.ceil(math.log10(max(abs(lo), abs(hi)) / (hi - lo))) + 2))  # tell them apart
        span = f" ({lo:.{digits}g} to {hi:.{digits}g})"
    bar = fig.colorbar(mappable, ax=ax, label=label + span)
    fmt = ScalarFormatter(useOffset=False)
    fmt.set_powerlimits((-4, 5))
    bar.formatter = fmt
    bar.update_ticks()
    return bar


def archive_figure(run: dict[str, Any], rep: Replay) -> Any:
    """The ``archive plot`` figure: the grid (axes in feature units) or the elites, and progress."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arc = rep.archive
    fig, (ax_map, ax_hist) = plt.subplots(1, 2, figsize=(12, 5))
    grid = _grid_matrix(arc)
    if grid is not None:
        mat, names, extent = grid
        im = ax_map.imshow(mat, origin="lower", aspect="auto", cmap="viridis", extent=extent)
        _colorbar(fig, ax_map, im, mat, "best score")
        unit = "" if extent is not None else " (bin)"  # ranges unknown (nothing admitted): bin indices
        ax_map.set_xlabel(_safe(f"{names[0]}{unit}"))
        ax_map.set_ylabel(_safe(f"{names[1]}{unit}"))
        ax_map.set_title("best score per cell")
    else:
        elites = arc.elites()
        dims = sorted(set.intersection(*(set(e.features) for e in elites))) if elites else []
        if len(dims) >= 2:
            xs = [e.features[dims[0]] for e in elites]
            ys = [e.features[dims[1]] for e in elites]
            sc = ax_map.scatter(xs, ys, c=[e.score for e in elites], cmap="viridis", s=18)
            _colorbar(fig, ax_map, sc, [e.score for e in elites], "score")
            ax_map.set_xlabel(_safe(dims[0]))
            ax_map.set_ylabel(_safe(dims[1]))
            ax_map.set_title(f"elites ({arc.stats()['archive']})")
        else:
            ax_map.text(0.5, 0.5, "no 2-D features to map", ha="center", va="center")
            ax_map.set_axis_off()
    hist = [h for h in rep.history if h["best_score"] is not None]
    if hist:
        x = [h["evaluations"] for h in hist]
        ax_hist.plot(x, [h["best_score"] for h in hist], color="tab:blue", label="best score")
        ax_hist.set_xlabel("evaluations")
        ax_hist.set_ylabel("best score", color="tab:blue")
        ax_qd = ax_hist.twinx()
        ax_qd.plot(x, [h["qd_score"] for h in hist], color="tab:orange", label="QD-score")
        ax_qd.set_ylabel("QD-score", color="tab:orange")
        ax_hist.set_title("progress")
    else:
        ax_hist.text(0.5, 0.5, "no admitted program yet", ha="center", va="center")
        ax_hist.set_axis_off()
    fig.suptitle(_safe(f"run {run['id'][:12]} ({run.get('name')})"))
    fig.tight_layout()
    return fig


@archive.command("plot")
@db_option()
@click.option("--run", "run_id", default=None, help=RUN_HELP)
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False), help="Output image (.png).")
@plugin_option(ARCHIVE_PLUGIN_HELP)
def plot_cmd(db: str, run_id: str | None, out: str, plugins: tuple[Path, ...]) -> None:
    """Heatmap of a 2-D grid (best score per cell, axes in feature units) plus best and QD-score per evaluation."""
    load_plugins(plugins)
    import matplotlib.pyplot as plt

    with open_store(db) as store:
        run, rep = rebuild(store, run_id)
    fig = archive_figure(run, rep)
    path = Path(out)
    if not path.parent.is_dir():
        raise ConfigError(f"--out {out}: directory {path.parent} does not exist")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    click.echo(f"wrote {_safe(path)}")
