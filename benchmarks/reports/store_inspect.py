"""The inspection commands on a large run (``benchmarks/bench_store.py --only-inspect --raw
store_inspect``, SQLite and, with ``--pg``, PostgreSQL) from ``benchmarks/results/store_inspect.json``.

The rows and their rules are ``store.json``'s (``benchmarks/reports/store.py``): per command and
database, the median wall time over the repeats with its 90 % bootstrap interval, the median CPU
time of the command's process, peak RSS, and the goals of issue 14 (<= 3 s and <= 300 MB on a
200,000-program run) judged by rule.

Keys: ``inspect`` (every command on every database measured) and ``setup`` (what was built).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

_spec = importlib.util.spec_from_file_location("bench_report_store_for_inspect", Path(__file__).with_name("store.py"))
assert _spec is not None and _spec.loader is not None
store = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(store)


def setup_line(raw: dict[str, Any]) -> str:
    s = raw.get("settings") or {}
    dbs = list(dict.fromkeys(r["backend"] for r in raw["rows"] if r["kind"] == "inspect"))  # measured order
    names = {"sqlite": f"SQLite {s.get('sqlite', '')}".strip(), "postgresql": "PostgreSQL (local server)"}
    return (f"Setup: one run of {s.get('inspect_n', 0):,} programs built once per database "
            f"({', '.join(names.get(d, d) for d in dbs) or 'none'}), then {s.get('repeats', '?')} rounds of the "
            "three commands, each a fresh `qdevolve` process.")


def render(raw: dict[str, Any]) -> dict[str, str]:
    return {"inspect": store.table(raw, kinds={"inspect"}), "setup": setup_line(raw)}
