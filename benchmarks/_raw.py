"""Raw benchmark results: write and read ``benchmarks/results/<name>.json``, and judge claims by rule.

Every benchmark keeps the numbers its tables use in one raw file with a top-level ``meta``
(commit, dirty flag, UTC date, command line, load average, machine facts, seeds); the tables of
``BENCHMARKS.md`` and the figures of the README are rendered from those files alone
(``benchmarks/report.py``).

Intervals are percentile-bootstrap intervals over seeds (Efron & Tibshirani 1993, *An
Introduction to the Bootstrap*, ch. 13): ``n`` times, resample the per-seed units with
replacement (a unit is one value, or a tuple of paired values of one seed), apply the
statistic, and take the ``(1 - level) / 2`` and ``(1 + level) / 2`` order statistics of the
``n`` results. The generator is seeded, so the same values always give the same interval.

A claim "statistic > null" (or "< null") **holds** only when the whole interval lies on the
claimed side of the null, **holds in the mean** when only the point estimate does, and
**does not hold** otherwise (``verdict``).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["RESULTS", "Interval", "bootstrap_interval", "describe_meta", "git_state", "load_raw", "machine_facts", "raw_path",
           "start_meta", "verdict", "write_raw"]

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
LEVEL = 0.9
RESAMPLES = 4000
VERDICTS = ("holds", "holds in the mean", "does not hold")


def raw_path(name: str, results: Path | None = None) -> Path:
    """The raw file of benchmark ``name``: ``benchmarks/results/<name>.json``."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"raw result name {name!r}: use a plain file stem such as 'agents' or 'suite_beta0.1'")
    return (results or RESULTS) / f"{name}.json"


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout


def git_state(root: Path | None = None) -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the working tree at ``root`` (default: this repository); files under
    ``benchmarks/results/`` do not make it dirty (the raw file being written, and other benchmarks'
    raw files, are outputs, not the code measured). ``None`` where git cannot tell."""
    root = root or ROOT
    commit = _git(root, "rev-parse", "HEAD")
    status = _git(root, "status", "--porcelain", "--", ".", ":(exclude)benchmarks/results")
    return (commit.strip() if commit else None), (None if status is None else bool(status.strip()))


def machine_facts() -> dict[str, Any]:
    """CPU count, platform, Python and the versions of the libraries benchmarks depend on."""
    facts: dict[str, Any] = {"cpu_count": os.cpu_count(), "machine": platform.machine(),
                             "system": platform.system(), "python": platform.python_version()}
    for dist in ("torch", "transformers", "numpy"):
        try:
            facts[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            facts[dist] = None
    return facts


def start_meta(root: Path | None = None) -> dict[str, Any]:
    """The state of the tree and machine when a measurement starts: ``commit``, ``dirty``, ``started``
    (UTC) and ``loadavg_start``. Pass it as ``write_raw(..., meta=start_meta_taken_before)`` so the raw
    file names the code that was measured, not the tree at the time of writing."""
    commit, dirty = git_state(root)
    return {"commit": commit, "dirty": dirty,
            "started": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "loadavg_start": [round(x, 2) for x in os.getloadavg()]}


def write_raw(name: str, data: dict[str, Any], *, command: str | None = None, seeds: Sequence[Any] | None = None,
              root: Path | None = None, meta: dict[str, Any] | None = None) -> Path:
    """Write ``data`` with a fresh ``meta`` to ``benchmarks/results/<name>.json``; return the path.

    ``meta`` holds commit, dirty, date (UTC, ISO 8601), command (``command`` or this process's
    command line), loadavg (``os.getloadavg()`` now), machine facts, seeds (``seeds``, else
    ``data["seeds"]`` when present) and the keys of ``meta``, which win (``start_meta()`` taken
    before the measurement: its commit, dirty flag, start time and load).

    Raises:
        ValueError: ``data`` already has a ``meta`` key, or is not JSON-serialisable.
    """
    if "meta" in data:
        raise ValueError(f"write_raw({name!r}): data has its own 'meta' key; pass extra meta fields as meta=")
    path = raw_path(name, (root or ROOT) / "benchmarks" / "results")
    commit, dirty = git_state(root)
    head = {"commit": commit, "dirty": dirty,
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": command if command is not None else shlex.join([Path(sys.executable).name, *sys.argv]),
            "loadavg": [round(x, 2) for x in os.getloadavg()], "machine": machine_facts(),
            "seeds": list(seeds) if seeds is not None else list(data.get("seeds", [])), **(meta or {})}
    try:
        text = json.dumps({"meta": head, **data}, indent=1, sort_keys=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"write_raw({name!r}): data is not plain JSON ({exc}); use None for a missing value") from exc
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(text + "\n")
    tmp.replace(path)
    return path


def load_raw(name: str, results: Path | None = None) -> dict[str, Any]:
    """The raw file of ``name`` as a dict.

    Raises:
        FileNotFoundError: no such file (the message names it and the benchmark that writes it).
        ValueError: the file is not JSON or has no ``meta``.
    """
    path = raw_path(name, results)
    if not path.exists():
        raise FileNotFoundError(f"raw result {path} is missing: run the benchmark that writes it "
                                f"(see BENCHMARKS.md) or restore it from git")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"raw result {path}: not JSON ({exc})") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("meta"), dict):
        raise ValueError(f"raw result {path}: no top-level 'meta' object")
    return raw


def _load(values: Any) -> str:
    if not values:
        return "not recorded"
    if isinstance(values, dict) and {"before", "after"} <= set(values):  # sampled around the measurement
        return f"{_load(values['before'])} before and {_load(values['after'])} after the measurement"
    return f"{values[0]:.1f}" if isinstance(values, list) else str(values)


def _seeds(seeds: Any) -> str:
    if isinstance(seeds, list) and not seeds:
        return "none (nothing random: repeats of one measurement)"
    if isinstance(seeds, list) and seeds and all(isinstance(s, int) for s in seeds) and \
            seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 2:
        return f"{len(seeds)} ({seeds[0]}-{seeds[-1]})"
    return f"{len(seeds)} ({', '.join(map(str, seeds))})" if isinstance(seeds, list) else str(seeds)


def describe_meta(name: str, meta: dict[str, Any]) -> str:
    """One provenance line for a section: raw file, commit (dirty or not), command, seeds, date and load."""
    if meta.get("commit"):
        commit = f"commit `{str(meta['commit'])[:7]}`" + {True: " (tree dirty)", False: " (clean tree)"}.get(
            meta.get("dirty"), "")
    elif meta.get("committed_in"):
        commit = f"commit not recorded (figures committed in `{meta['committed_in']}`)"
    else:
        commit = "commit not recorded"
    when = meta.get("date", "?")
    if meta.get("started"):
        when = f"{meta['started']} to {when}"
    load = f"1-minute load average {_load(meta.get('loadavg'))}" + ("" if isinstance(meta.get("loadavg"), dict)
                                                                    else " at the end")
    if meta.get("loadavg_start"):
        load = f"1-minute load average {_load(meta.get('loadavg_start'))} at the start, {_load(meta.get('loadavg'))} at the end"
    cores = (meta.get("machine") or {}).get("cpu_count") if isinstance(meta.get("machine"), dict) else None
    return (f"Raw file `benchmarks/results/{name}.json`: {commit}; command `{meta.get('command', '?')}`; "
            f"seeds {_seeds(meta.get('seeds', []))}; {when}; {load}" + (f" ({cores} shared cores)." if cores else "."))


@dataclass(frozen=True)
class Interval:
    """A point estimate and its bootstrap interval (``lo``/``hi`` ``None`` with fewer than 2 units)."""

    estimate: float
    lo: float | None
    hi: float | None
    level: float
    n_units: int

    @property
    def has_interval(self) -> bool:
        return self.lo is not None and self.hi is not None

    def text(self, fmt: str = "{:.2f}", suffix: str = "", unit: str = "seed") -> str:
        """``0.78x (90 % interval 0.61x to 0.95x, 5 seeds)``; ``inf`` prints as "not reached"."""
        def f(x: float) -> str:
            return "not reached" if math.isinf(x) else fmt.format(x) + suffix
        units = f"{self.n_units} {unit}{'s' * (self.n_units != 1)}"
        if not self.has_interval:
            return f"{f(self.estimate)} ({units}, no interval)"
        return f"{f(self.estimate)} ({round(100 * self.level)} % interval {f(self.lo)} to {f(self.hi)}, {units})"  # type: ignore[arg-type]


def _order_stat(sorted_values: np.ndarray, q: float, *, upper: bool) -> float:
    """The ``q`` quantile as an order statistic (no interpolation, so infinite values stay exact)."""
    pos = q * (len(sorted_values) - 1)
    return float(sorted_values[math.ceil(pos) if upper else math.floor(pos)])


def bootstrap_interval(values: Sequence[float] | Sequence[Sequence[float]],
                       statistic: Callable[[np.ndarray], float] = np.mean, *, level: float = LEVEL,
                       n: int = RESAMPLES, seed: int = 0) -> Interval:
    """The statistic of the per-seed ``values`` with its percentile-bootstrap interval.

    ``values`` is one number per seed, or one tuple per seed (paired samples: e.g. calls of two
    frameworks on the same seed, or unpaired samples padded to rows); the statistic receives an
    array of the resampled rows (shape ``(k,)`` or ``(k, width)``) and returns a number
    (``inf`` is allowed: e.g. a target not reached). The estimate is the statistic of the values
    themselves; the interval the ``(1 - level) / 2`` and ``(1 + level) / 2`` order statistics of
    ``n`` resamples drawn with ``numpy.random.default_rng(seed)``.

    Raises:
        ValueError: no values, ``level`` outside (0, 1), ``n`` < 1, or the statistic gives NaN.
    """
    if not 0 < level < 1:
        raise ValueError(f"bootstrap_interval: level must be in (0, 1), got {level}")
    if n < 1:
        raise ValueError(f"bootstrap_interval: n must be >= 1 resamples, got {n}")
    x = np.asarray(values, dtype=float)
    if x.size == 0 or len(x) == 0:
        raise ValueError("bootstrap_interval: no values (one per seed expected)")
    estimate = float(statistic(x))
    if math.isnan(estimate):
        raise ValueError(f"bootstrap_interval: the statistic of the values is NaN ({x.tolist()})")
    if len(x) < 2:
        return Interval(estimate, None, None, level, len(x))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n, len(x)))
    stats = np.array([float(statistic(x[row])) for row in idx])
    if np.isnan(stats).any():
        raise ValueError("bootstrap_interval: the statistic gave NaN on a resample; return inf for 'not reached'")
    stats.sort()
    return Interval(estimate, _order_stat(stats, (1 - level) / 2, upper=False),
                    _order_stat(stats, (1 + level) / 2, upper=True), level, len(x))


def verdict(interval: Interval, null: float, direction: str) -> str:
    """``holds`` / ``holds in the mean`` / ``does not hold`` for the claim "statistic <direction> null".

    ``direction`` is ``"greater"`` (the claim is estimate > null) or ``"less"``. **holds**: the
    whole interval is on the claimed side (strictly: an end equal to the null does not exclude it);
    **holds in the mean**: only the point estimate is; **does not hold**: not even the estimate.

    Raises:
        ValueError: an unknown direction.
    """
    if direction not in ("greater", "less"):
        raise ValueError(f"verdict: direction must be 'greater' or 'less', got {direction!r}")
    sign = 1.0 if direction == "greater" else -1.0
    if sign * (interval.estimate - null) <= 0:
        return "does not hold"
    if interval.has_interval:
        bound = interval.lo if direction == "greater" else interval.hi
        if sign * (bound - null) > 0:  # type: ignore[operator]
            return "holds"
    return "holds in the mean"
