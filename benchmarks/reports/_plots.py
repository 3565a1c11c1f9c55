"""The task grid the sample-efficiency renderers draw: per task, the median best score and the
median top-10 mean against model calls, one line per framework or arm, with the min-max band
over seeds (``None`` in a series is a call before any score)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def draw_task_grid(png: Path, tasks: dict[str, dict[str, dict[str, Any]]], calls: list[int], *,
                   label: Callable[[str], str] = str, title: Callable[[str], str] = str,
                   colors: dict[str, str] | None = None) -> None:
    """``tasks[task][line][key] = {"median", "lo", "hi"}`` for ``key`` in ``best``, ``top10``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def nan(xs: list[float | None]) -> list[float]:
        return [float("nan") if x is None else x for x in xs]

    names = list(tasks)
    fig, axes = plt.subplots(2, len(names), figsize=(4.2 * len(names), 6.0), squeeze=False)
    for j, task in enumerate(names):
        for i, key in enumerate(("best", "top10")):
            ax = axes[i][j]
            for line_name, series in tasks[task].items():
                s = series[key]
                (line,) = ax.plot(calls, nan(s["median"]), label=label(line_name),
                                  color=(colors or {}).get(line_name))
                if s.get("lo"):
                    ax.fill_between(calls, nan(s["lo"]), nan(s["hi"]), alpha=0.15, color=line.get_color())
            ax.set_title(f"{title(task)}: {'best score' if key == 'best' else 'top-10 mean'}", fontsize=9)
            ax.set_xlabel("model calls", fontsize=8)
            ax.tick_params(labelsize=7)
            if i == 0 and j == 0:
                ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=80)
    plt.close(fig)
