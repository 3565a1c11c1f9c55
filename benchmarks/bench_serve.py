"""Web viewer benchmark: first view of a 100,000-program run in a real headless Chromium.

Usage::

    .venv/bin/python benchmarks/bench_serve.py                      # 100,000 programs, 5 repeats
    .venv/bin/python benchmarks/bench_serve.py --programs 2000 --repeats 2 --raw serve_small   # smoke run

Goal (issue 15): the first view of a 100,000-program database in <= 2 s. "First view" is the
time from the browser's navigation command to ``/`` until the lineage tree is drawn (the page
sets ``data-tree-ready`` on ECharts' ``finished`` event). The goal is judged by rule
(``reports/_goals.py``) on the median over repeats and its percentile-bootstrap 90 % interval
over the repeats; it is stated for 100,000 programs, so a smaller ``--programs`` is not judged.

Every repeat is a fresh ``qdevolve serve`` process and a fresh Chromium with a fresh profile,
and measures, in this order:

* tree API, cold: one ``/api/runs/<id>/tree`` call on an in-process app built without warm-up
  (wall and CPU seconds of this process; the lineage read and built on that call);
* server start: process start -> URL printed (``qdevolve serve`` reads the newest run's lineage
  before it prints its URL) -> ``/api`` answering;
* first view: navigate to ``/`` until the tree is drawn, as soon as the server answers, with the
  CPU seconds of the server process and of the browser (all its processes) over that interval;
* later views: the same page in ``--views`` new tabs (lineage cached, scripts in the profile's
  cache); the repeat's figure is their median;
* tree API, cached and filtered (status, generation window): ``--calls`` calls each over HTTP;
  the repeat's figure is their median;
* archive page: navigate to ``/runs/<id>/archive`` until the heatmap and curves are drawn.

A measurement that fails is recorded with its error (and no value) and the next one is tried.
The database is synthetic (``tests/serve/synth.py``, seed 0: random lineage biased to recent
parents, 8% failures, one evaluation per program, a 10 x 10 MAP-Elites archive), written once
before the clock starts. The raw file ``benchmarks/results/serve.json`` (``--raw NAME`` for
another) holds every measurement of every repeat, the 1-minute load average at each, and in its
``meta`` the commit, dirty flag, command, load average before and after, machine and Chromium
version; it is rewritten after every repeat. Its tables are rendered by
``benchmarks/reports/serve.py`` (``python benchmarks/report.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
from _raw import load_raw, start_meta, write_raw  # noqa: E402
from serve import synth  # noqa: E402
from serve.chromium import Chromium, find_chromium  # noqa: E402
from serve.conftest import Server  # noqa: E402

SEED = 0  # synth.synthetic_run's seed
TIMEOUT_S = 120.0  # per navigation
GOALS: dict[str, list[dict[str, Any]]] = {
    "first_view": [{"metric": "wall_s", "op": "<=", "value": 2, "unit": "s", "applies_to": {"programs": 100_000}}],
}


def chromium_version(exe: str) -> str | None:
    """``Chromium 156.0.8078.129 built on Debian ...`` (stdout of ``chromium --version``), or None."""
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _row(kind: str, repeat: int, programs: int, **fields: Any) -> dict[str, Any]:
    """One measurement of one repeat, with its goals and the 1-minute load average now."""
    row = {"kind": kind, "repeat": repeat, "programs": programs, **fields,
           "loadavg": round(os.getloadavg()[0], 2), "goals": GOALS.get(kind, [])}
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}


def _attempt(rows: list[dict[str, Any]], kind: str, repeat: int, programs: int,
             fn: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
    """Run one measurement; its row (with ``error`` and no value when it raised)."""
    try:
        fields = fn()
    except Exception as exc:  # noqa: BLE001 - recorded in the raw file; the next measurement is tried
        fields = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        print(f"repeat {repeat}: {kind} failed: {fields['error']}", file=sys.stderr)
    rows.append(_row(kind, repeat, programs, **fields))
    return None if "error" in fields else fields


def api_cold(db: Path, run_id: str) -> dict[str, Any]:
    """Wall and CPU seconds of one tree API call on an in-process app built without warm-up."""
    import uvicorn

    from qdevolve.serve import create_app

    app = create_app(str(db), warm=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            if time.monotonic() > deadline or not t.is_alive():
                raise RuntimeError("the in-process server did not start")
            time.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        t0, c0 = time.perf_counter(), time.process_time()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs/{run_id}/tree", timeout=TIMEOUT_S) as r:
            r.read()
        return {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
    finally:
        server.should_exit = True
        t.join(timeout=10)
        app.state.db.close()


def _timed_get(server: Server, path: str, calls: int) -> dict[str, Any]:
    walls = []
    for _ in range(calls):
        t0 = time.perf_counter()
        status, _, body = server.get(path)
        walls.append(round(time.perf_counter() - t0, 6))
        if status != 200:
            raise RuntimeError(f"GET {path}: HTTP {status} {body[:200]!r}")
    return {"call_wall_s": walls, "path": path}


def one_repeat(db: Path, run_id: str, programs: int, repeat: int, views: int, calls: int) -> list[dict[str, Any]]:
    """Every measurement of one repeat: a fresh server and a fresh browser profile."""
    import psutil

    rows: list[dict[str, Any]] = []
    _attempt(rows, "api_cold", repeat, programs, lambda: api_cold(db, run_id))
    with Chromium() as browser:
        chrome = psutil.Process(browser.proc.pid)

        def browser_cpu() -> float:
            total = 0.0
            for proc in [chrome, *chrome.children(recursive=True)]:
                try:
                    total += sum(proc.cpu_times()[:2])
                except psutil.NoSuchProcess:
                    pass
            return total

        holder: dict[str, Server] = {}

        def start() -> dict[str, Any]:
            t0 = time.perf_counter()
            holder["server"] = Server(db)
            return {"wall_s": time.perf_counter() - t0}

        def server() -> Server:
            if "server" not in holder:
                raise RuntimeError("no server (its start failed)")
            return holder["server"]

        def navigate(path: str, ready: str) -> float:
            page = browser.new_page()
            try:
                return page.navigate(server().url + path, wait_for=f"document.body.dataset.{ready}", timeout=TIMEOUT_S)
            finally:
                page.close()

        def first_view() -> dict[str, Any]:
            srv = psutil.Process(server().proc.pid)
            page = browser.new_page()
            try:
                cpu0, bcpu0 = sum(srv.cpu_times()[:2]), browser_cpu()
                wall = page.navigate(server().url + "/", wait_for="document.body.dataset.treeReady", timeout=TIMEOUT_S)
                cpu1, bcpu1 = sum(srv.cpu_times()[:2]), browser_cpu()
                shown = int(page.evaluate("document.body.dataset.treeNodes"))
                total = int(page.evaluate("document.body.dataset.treePrograms"))
            finally:
                page.close()
            return {"wall_s": wall, "server_cpu_s": cpu1 - cpu0, "browser_cpu_s": bcpu1 - bcpu0,
                    "tree_nodes": shown, "tree_programs": total}

        try:
            _attempt(rows, "server_start", repeat, programs, start)
            _attempt(rows, "first_view", repeat, programs, first_view)
            _attempt(rows, "later_view", repeat, programs,
                     lambda: {"view_wall_s": [round(navigate("/", "treeReady"), 6) for _ in range(views)]})
            _attempt(rows, "api_cached", repeat, programs,
                     lambda: _timed_get(server(), f"/api/runs/{run_id}/tree", calls))
            _attempt(rows, "api_filtered", repeat, programs,
                     lambda: _timed_get(server(), f"/api/runs/{run_id}/tree?status=failed&gen_min=10&gen_max=40",
                                        calls))
            _attempt(rows, "archive_page", repeat, programs,
                     lambda: {"wall_s": navigate(f"/runs/{run_id}/archive", "archiveReady")})
        finally:
            if "server" in holder:
                holder["server"].stop()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", type=int, default=100_000, help="programs in the synthetic run (the goal is "
                                                                     "stated for 100,000)")
    ap.add_argument("--repeats", type=int, default=5, help="repeats: each a fresh server and a fresh browser profile")
    ap.add_argument("--views", type=int, default=3, help="later views (new tabs) per repeat")
    ap.add_argument("--calls", type=int, default=3, help="cached and filtered tree API calls per repeat")
    ap.add_argument("--raw", default="serve", help="raw file name under benchmarks/results/ (default serve)")
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)  # the markdown report is gone
    args = ap.parse_args()
    if args.out is not None:
        ap.error("--out: markdown is no longer written; the raw file is benchmarks/results/<--raw>.json and "
                 "benchmarks/report.py renders its tables")
    if min(args.programs, args.repeats, args.views, args.calls) < 1:
        ap.error("--programs, --repeats, --views and --calls must be >= 1")
    exe = find_chromium()
    if exe is None:
        print("chromium is not installed (apt-get install chromium, or set QDEVOLVE_CHROMIUM)", file=sys.stderr)
        return 2
    meta = start_meta()
    load0 = [round(x, 2) for x in meta.pop("loadavg_start")]
    meta["chromium"] = chromium_version(exe)
    command = shlex.join(["python", "benchmarks/bench_serve.py", *sys.argv[1:]])
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="qdevolve-bench-serve-") as tmp:
        db = Path(tmp) / "big.sqlite"
        t0 = time.perf_counter()
        run_id = synth.synthetic_run(db, args.programs, seed=SEED)
        settings = {"programs": args.programs, "repeats": args.repeats, "views": args.views, "calls": args.calls,
                    "seed": SEED, "navigation_timeout_s": TIMEOUT_S, "goals": GOALS,
                    "database_written_s": round(time.perf_counter() - t0, 3), "database_bytes": db.stat().st_size}

        def save() -> None:
            load = {"before": load0, "after": [round(x, 2) for x in os.getloadavg()]}
            write_raw(args.raw, {"settings": settings, "rows": rows}, command=command, seeds=[SEED],
                      meta={**meta, "loadavg": load})

        for k in range(args.repeats):
            rows += one_repeat(db, run_id, args.programs, k, args.views, args.calls)
            fv = next((r for r in rows if r["kind"] == "first_view" and r["repeat"] == k), {})
            print(f"repeat {k}: first view {fv.get('wall_s', fv.get('error'))} s (load {os.getloadavg()[0]:.2f})",
                  file=sys.stderr)
            save()
    # benchmarks/reports/serve.py (the tables BENCHMARKS.md shows), loaded by path: the name
    # "serve" is already tests/serve here
    spec = importlib.util.spec_from_file_location("bench_serve_report", ROOT / "benchmarks" / "reports" / "serve.py")
    assert spec is not None and spec.loader is not None
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    out = report.render(load_raw(args.raw))
    print(out.pop("table"))
    print("\n".join(f"{k}: {v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
