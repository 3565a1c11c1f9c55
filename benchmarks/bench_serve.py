"""Web viewer benchmark: first view of a 100,000-program run in a real headless Chromium.

Usage::

    .venv/bin/python benchmarks/bench_serve.py                  # 100,000 programs
    .venv/bin/python benchmarks/bench_serve.py --programs 20000 --out benchmarks/results/serve.md

Goal (issue 15): the first view of a 100k-program database in <= 2 s. "First view" is the time
from the browser's navigation command to ``/`` until the lineage tree is drawn (the page sets
``data-tree-ready`` on ECharts' ``finished`` event), measured three ways:

* first view: a fresh ``qdevolve serve`` process (which reads the newest run's lineage before
  it prints its URL), the page opened as soon as the URL is printed;
* warm: the same page opened again in a new tab (lineage cached; what every later visit costs);
* API: the ``/api/runs/<id>/tree`` call alone, cold (a fresh server started with no warm-up) and warm.

The database is synthetic (``tests/serve/synth.py``: random lineage biased to recent
parents, 8% failures, one evaluation and archive event per program), written before the clock
starts. Machine load (``uptime``) is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from serve import synth  # noqa: E402
from serve.chromium import Chromium, find_chromium  # noqa: E402
from serve.conftest import Server  # noqa: E402


def _load() -> str:
    return os.getloadavg().__repr__() if hasattr(os, "getloadavg") else "?"


def _api_cold(db: Path, run_id: str) -> tuple[float, float]:
    """Wall and CPU seconds of one tree API call on an in-process app built without warm-up."""
    import threading

    import uvicorn

    from qdevolve.serve import create_app

    app = create_app(str(db), warm=False)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error")
    server = uvicorn.Server(config)
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    t0, c0 = time.perf_counter(), time.process_time()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs/{run_id}/tree", timeout=120) as r:
        r.read()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    server.should_exit = True
    t.join(timeout=10)
    return dt, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3, help="warm views and API calls timed")
    ap.add_argument("--out", type=Path, default=None, help="also write the table to this markdown file")
    args = ap.parse_args()
    if find_chromium() is None:
        print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="qdevolve-bench-serve-") as tmp:
        db = Path(tmp) / "big.sqlite"
        t0 = time.perf_counter()
        run_id = synth.synthetic_run(db, args.programs)
        build_s = time.perf_counter() - t0
        rows: list[tuple[str, str]] = []
        load_before = _load()
        api_cold, api_cold_cpu = _api_cold(db, run_id)
        with Chromium() as browser:
            t_start = time.perf_counter()
            server = Server(db)
            started = time.perf_counter() - t_start
            try:
                import psutil

                srv = psutil.Process(server.proc.pid)
                chrome = psutil.Process(browser.proc.pid)

                def browser_cpu() -> float:
                    total = 0.0
                    for proc in [chrome, *chrome.children(recursive=True)]:
                        try:
                            total += sum(proc.cpu_times()[:2])
                        except psutil.NoSuchProcess:
                            pass
                    return total

                cpu0, bcpu0 = sum(srv.cpu_times()[:2]), browser_cpu()
                page = browser.new_page()
                cold = page.navigate(server.url + "/", wait_for="document.body.dataset.treeReady", timeout=120)
                cold_cpu, cold_bcpu = sum(srv.cpu_times()[:2]) - cpu0, browser_cpu() - bcpu0
                shown = page.evaluate("document.body.dataset.treeNodes")
                total = page.evaluate("document.body.dataset.treePrograms")
                page.close()
                warm = []
                for _ in range(args.repeats):
                    p = browser.new_page()
                    warm.append(p.navigate(server.url + "/", wait_for="document.body.dataset.treeReady", timeout=120))
                    p.close()
                api_warm = []
                for _ in range(args.repeats):
                    t1 = time.perf_counter()
                    server.get(f"/api/runs/{run_id}/tree")
                    api_warm.append(time.perf_counter() - t1)
                t1 = time.perf_counter()
                server.get(f"/api/runs/{run_id}/tree?status=failed&gen_min=10&gen_max=40")
                filt = time.perf_counter() - t1
                p = browser.new_page()
                arch = p.navigate(f"{server.url}/runs/{run_id}/archive", wait_for="document.body.dataset.archiveReady",
                                  timeout=120)
                p.close()
            finally:
                server.stop()
        load_after = _load()
    rows += [
        ("programs in the run (drawn)", f"{total} ({shown} drawn, the rest aggregated)"),
        ("first view of a fresh server (navigate -> tree drawn)", f"{cold:.2f} s"),
        (f"later views, new tab (median of {args.repeats})", f"{statistics.median(warm):.2f} s"),
        ("CPU time of the first view: server / browser", f"{cold_cpu:.2f} s / {cold_bcpu:.2f} s"),
        ("tree API, cold (no warm-up): wall / CPU", f"{api_cold:.2f} s / {api_cold_cpu:.2f} s"),
        (f"tree API, cached (median of {args.repeats})", f"{statistics.median(api_warm) * 1000:.0f} ms"),
        ("tree API with filters (status, generations), cached", f"{filt * 1000:.0f} ms"),
        ("archive page (navigate -> heatmap and curves drawn)", f"{arch:.2f} s"),
        ("server start (process start -> URL printed, lineage read)", f"{started:.2f} s"),
        ("synthetic database written in", f"{build_s:.1f} s"),
        ("load average before / after (1, 5, 15 min)", f"{load_before} / {load_after}"),
        ("machine", f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"),
    ]
    lines = ["| measure | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    text = "\n".join(lines)
    print(text)
    print("goal: first view <= 2 s:", "met" if cold <= 2.0 else "NOT met")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        args.out.write_text(f"`python benchmarks/bench_serve.py --programs {args.programs}` at {stamp}\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
