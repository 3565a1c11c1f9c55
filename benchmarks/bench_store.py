"""Lineage-store benchmark: batched inserts, deep ancestry, the run graph and its exports.

Usage::

    .venv/bin/python benchmarks/bench_store.py                 # print the table
    .venv/bin/python benchmarks/bench_store.py --out benchmarks/results/store.md

Goals (issue 14, item 8): on a 200,000-program run ``archive stats``, ``lineage export
--format graphml`` and ``lineage tree --depth 50 --top 1000`` each <= 3 s and <= 300 MB (peak
RSS of the command's process), measured as real ``qdevolve`` processes (``--inspect-n``).

Goals (issue 2): insert >= 20,000 programs/s (each with its parent edge and an evaluation,
batched); ancestry of a 5,000-deep chain < 50 ms; networkx graph of a 100,000-program run
< 3 s; GraphML export of it < 10 s. Programs are built before the clock starts, so the
insert figure is the store's cost (row building, JSON, SQL), not ``Program``'s hashing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from qdevolve.db import lineage as L
from qdevolve.db.store import LineageStore
from qdevolve.types import EvalResult, Program


def build_programs(run_id: str, n: int, seed: int = 0) -> tuple[list[Program], list[EvalResult]]:
    rng = random.Random(seed)
    progs: list[Program] = []
    for i in range(n):
        parents = (progs[rng.randrange(len(progs))].id,) if progs else ()
        progs.append(Program(code=f"def solve(x):\n    return x * {i} + {rng.random():.6f}\n",
                             run_id=run_id, parent_ids=parents, generation=0 if not parents else 1,
                             operator="diff" if parents else "seed", island=i % 4,
                             policy_version=i // 1000, prompt_hash=f"{i:032x}"))
    results = [EvalResult(score=rng.random(), metrics={"combined_score": 0.5, "time": 0.01},
                          features={"len": float(i % 100)}, runtime_s=0.1) for i in range(n)]
    return progs, results


class _Clock:
    """Wall and CPU time of a block (CPU time is the fairer figure on a shared machine)."""

    def __enter__(self) -> _Clock:
        self.w0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.w0
        self.cpu = time.process_time() - self.c0


def bench(n: int, batch: int, chain: int, workdir: Path) -> list[tuple[str, str, str, str]]:
    rows = []
    store = LineageStore(workdir / "bench.sqlite", create=True)
    rid = store.create_run(name="bench")
    progs, results = build_programs(rid, n)
    with _Clock() as ck:
        for i in range(0, n, batch):
            store.write(programs=progs[i:i + batch],
                        evaluations=[(p.id, r) for p, r in zip(progs[i:i + batch], results[i:i + batch], strict=True)])
    rows.append((f"insert {n:,} programs + edges + evaluations (batches of {batch:,})",
                 f"{n / ck.wall:,.0f} programs/s", ">= 20,000 programs/s",
                 f"{ck.wall:.2f} s wall; {n / ck.cpu:,.0f} programs per CPU-second"))

    crid = store.create_run(name="chain")
    cprogs, prev = [], ()
    for i in range(chain):
        p = Program(code=f"v = {i}\n", run_id=crid, parent_ids=prev, generation=i)
        cprogs.append(p)
        prev = (p.id,)
    store.write(programs=cprogs)
    walls, cpus = [], []
    for _ in range(7):
        with _Clock() as ck:
            got = L.ancestry(store, cprogs[-1].id)
        walls.append(ck.wall)
        cpus.append(ck.cpu)
    assert len(got) == chain
    rows.append((f"ancestry of a {chain:,}-deep chain (recursive CTE, median of 7)",
                 f"{statistics.median(walls) * 1000:.1f} ms", "< 50 ms",
                 f"min {min(walls) * 1000:.1f} ms wall; median {statistics.median(cpus) * 1000:.1f} ms CPU"))

    with _Clock() as ck:
        g = L.run_graph(store, rid)
    rows.append((f"networkx DiGraph of the {n:,}-program run", f"{ck.wall:.2f} s", "< 3 s",
                 f"{ck.cpu:.2f} s CPU; {g.number_of_nodes():,} nodes, {g.number_of_edges():,} edges"))
    for fmt, goal in (("graphml", "< 10 s"), ("json", "-"), ("dot", "-")):
        out = workdir / f"run.{fmt}"
        with _Clock() as ck:
            L.export(g, out, fmt)
        rows.append((f"export {fmt} of the {n:,}-program run", f"{ck.wall:.2f} s", goal,
                     f"{ck.cpu:.2f} s CPU; {out.stat().st_size / 1e6:.1f} MB"))
    store.close()

    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "qdevolve", "lineage", "tree", "--db",
                           str(workdir / "bench.sqlite"), "--run", rid, "--depth", "3", "--top", "5"],
                          capture_output=True, text=True, check=True)
    tt = time.perf_counter() - t
    rows.append((f"`qdevolve lineage tree --depth 3 --top 5` on the {n:,}-program run (process)",
                 f"{tt:.2f} s", "-", f"{len(proc.stdout.splitlines())} lines"))
    return rows


_MEASURE = ("import resource, subprocess, sys\n"
            "r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)\n"
            "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(r.returncode, ru.ru_maxrss, r.stdout.count(b'\\n'), ru.ru_utime + ru.ru_stime)\n")


def _command(args: list[str]) -> tuple[float, float, int, float]:
    """Wall seconds, peak RSS (MB), output lines and CPU seconds of one ``qdevolve`` process
    (a wrapper process reads the child's own ``ru_maxrss`` and CPU time)."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _MEASURE, sys.executable, "-m", "qdevolve", *args],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t
    rc, peak_kb, lines, cpu = proc.stdout.split()
    if int(rc) != 0:
        raise SystemExit(f"qdevolve {' '.join(args)} failed: {proc.stderr[-2000:]}")
    return wall, int(peak_kb) / 1024, int(lines), float(cpu)


def _store_like_a_run(store: LineageStore, rid: str, spec: dict, progs: list[Program],
                      results: list[EvalResult]) -> int:
    """Store the run as the engine would: rows and archive events in batches and, in the transaction of the
    evaluation where the engine's schedule would take it, an archive snapshot. Only the last
    snapshot is written (a reader uses the newest), placed where the schedule's interval
    leaves the longest tail: ``max(SNAPSHOT_EVERY, state bytes / BYTES_PER_TELL)`` tells
    before the end. Returns that tail."""
    from qdevolve import registry
    from qdevolve.archive import snapshot as snap

    arc = registry.archive.create(spec)
    for p, r in zip(progs, results, strict=True):  # the archive the run would have (untimed)
        arc.add(p, r)
    size = len(snap.encode(snap.snapshot(arc)))
    tail = min(len(progs) - 1, max(snap.SNAPSHOT_EVERY, size // snap.BYTES_PER_TELL) - 1)
    cut = len(progs) - tail
    arc = registry.archive.create(spec)
    bounds = sorted({*range(0, len(progs), 10_000), cut, len(progs)})
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        events = [e for p, r in zip(progs[lo:hi], results[lo:hi], strict=True) for e in arc.add(p, r)]
        store.write(programs=progs[lo:hi], run_id=rid, events=events,
                    evaluations=[(p.id, r) for p, r in zip(progs[lo:hi], results[lo:hi], strict=True)],
                    snapshot=snap.encode(snap.snapshot(arc)) if hi == cut else None)
    return tail


def bench_inspect(target: str, n: int, label: str) -> list[tuple[str, str, str, str]]:
    """Inspection commands on a run of ``n`` programs, each a fresh process (wall, peak RSS)."""
    store = LineageStore(target, create=True)
    spec = {"type": "map_elites", "feature_dimensions": ["len"]}
    rid = store.create_run(name="inspect", config={"archive": spec})
    progs, results = build_programs(rid, n)
    tail = _store_like_a_run(store, rid, spec, progs, results)
    if store.engine.dialect.name == "postgresql":
        # A run that grows over hours is analysed by autovacuum as it goes; these 200k rows
        # arrive in seconds, and before autovacuum's next pass the planner has no statistics
        # (archive stats then took 60 s of server time once). Measure the steady state.
        from sqlalchemy import text

        with store.engine.begin() as c:
            c.execute(text("ANALYZE"))
    store.close()
    del progs, results
    rows = []
    with tempfile.TemporaryDirectory(prefix="qdevolve-bench-out-") as d:
        for name, args in (
            ("archive stats", ["archive", "stats", "--db", target, "--run", rid]),
            ("lineage export --format graphml", ["lineage", "export", "--db", target, "--run", rid,
                                                 "--format", "graphml", "--out", f"{d}/run.graphml"]),
            ("lineage tree --depth 50 --top 1000", ["lineage", "tree", "--db", target, "--run", rid,
                                                    "--depth", "50", "--top", "1000"]),
        ):
            wall, peak, lines, cpu = _command(args)
            extra = f"; snapshot + {tail:,} evaluations replayed" if name == "archive stats" else ""
            rows.append((f"{label}`qdevolve {name}` on a {n:,}-program run (process)", f"{wall:.2f} s",
                         "<= 3 s, <= 300 MB", f"{cpu:.2f} s CPU; peak RSS {peak:.0f} MB; "
                         f"{lines:,} lines printed; load {os.getloadavg()[0]:.1f}{extra}"))
    return rows


def bench_postgres(url: str, n: int, batch: int, chain: int) -> list[tuple[str, str, str, str]]:
    """The insert, ancestry and graph figures on PostgreSQL (the database is emptied first)."""
    from sqlalchemy import create_engine

    from qdevolve.db import schema as S

    eng = create_engine(url)
    S.metadata.drop_all(eng)
    eng.dispose()
    store = LineageStore(url, create=True)
    rid = store.create_run(name="bench")
    progs, results = build_programs(rid, n)
    with _Clock() as ck:
        for i in range(0, n, batch):
            store.write(programs=progs[i:i + batch],
                        evaluations=[(p.id, r) for p, r in zip(progs[i:i + batch], results[i:i + batch], strict=True)])
    rows = [(f"PostgreSQL: insert {n:,} programs + edges + evaluations (batches of {batch:,})",
             f"{n / ck.wall:,.0f} programs/s", "-", f"{ck.wall:.2f} s wall; {ck.cpu:.2f} s client CPU")]
    crid = store.create_run(name="chain")
    cprogs, prev = [], ()
    for i in range(chain):
        p = Program(code=f"v = {i}\n", run_id=crid, parent_ids=prev, generation=i)
        cprogs.append(p)
        prev = (p.id,)
    store.write(programs=cprogs)
    walls = []
    for _ in range(7):
        with _Clock() as ck:
            L.ancestry(store, cprogs[-1].id)
        walls.append(ck.wall)
    rows.append((f"PostgreSQL: ancestry of a {chain:,}-deep chain (median of 7)",
                 f"{statistics.median(walls) * 1000:.1f} ms", "-", f"min {min(walls) * 1000:.1f} ms"))
    with _Clock() as ck:
        g = L.run_graph(store, rid)
    rows.append((f"PostgreSQL: networkx DiGraph of the {n:,}-program run", f"{ck.wall:.2f} s", "-",
                 f"{g.number_of_nodes():,} nodes"))
    S.metadata.drop_all(store.engine)
    store.close()
    return rows


def table(rows: list[tuple[str, str, str, str]]) -> str:
    lines = ["| measurement | result | goal | notes |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="programs in the big run")
    ap.add_argument("--batch", type=int, default=5_000, help="programs per write() transaction")
    ap.add_argument("--chain", type=int, default=5_000, help="depth of the ancestry chain")
    ap.add_argument("--out", type=Path, default=None, help="also write a markdown report here")
    ap.add_argument("--pg", default=os.environ.get("QDEVOLVE_BENCH_PG_URL"),
                    help="also measure this PostgreSQL URL (its qdevolve tables are dropped!)")
    ap.add_argument("--pg-n", type=int, default=20_000, help="programs for the PostgreSQL run")
    ap.add_argument("--inspect-n", type=int, default=200_000,
                    help="programs of the run the inspection commands are timed on (0: skip)")
    ap.add_argument("--only-inspect", action="store_true", help="only the inspection commands")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="qdevolve-bench-") as d:
        rows = [] if args.only_inspect else bench(args.n, args.batch, args.chain, Path(d))
        if args.inspect_n:
            rows += bench_inspect(str(Path(d) / "inspect.sqlite"), args.inspect_n, "")
    if args.pg:
        if not args.only_inspect:
            rows += bench_postgres(args.pg, args.pg_n, args.batch, args.chain)
        if args.inspect_n:
            from sqlalchemy import create_engine

            from qdevolve.db import schema as S

            eng = create_engine(args.pg)
            S.metadata.drop_all(eng)
            eng.dispose()
            rows += bench_inspect(args.pg, args.inspect_n, "PostgreSQL: ")
    text = table(rows)
    print(text)
    if args.out:
        argv = [a.replace(args.pg, "URL") if args.pg else a for a in sys.argv[1:]]  # no credentials
        cmd = "python benchmarks/bench_store.py " + " ".join(argv)
        machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()}"
        try:
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        except OSError:
            load = "?"
        args.out.parent.mkdir(parents=True, exist_ok=True)
        if not args.out.exists():
            args.out.write_text(
                "# Lineage store benchmark\n\nEach run of `benchmarks/bench_store.py --out` appends a "
                "section. Wall times on a shared machine move with its load; the CPU-time notes are "
                "the steadier figures.\n")
        with args.out.open("a") as fh:
            fh.write(
                f"\n## {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC\n\n{text}\n\n"
                f"- command: `{cmd}`\n"
                f"- machine: {machine}; load average at the end {load} (shared machine)\n"
                f"- SQLite {__import__('sqlite3').sqlite_version}, WAL, synchronous=NORMAL\n")


if __name__ == "__main__":
    main()
