"""Lineage-store benchmark: batched inserts, deep ancestry, the run graph and its exports.

Usage::

    .venv/bin/python benchmarks/bench_store.py                      # writes benchmarks/results/store.json
    .venv/bin/python benchmarks/bench_store.py --repeats 5 --raw store_5
    .venv/bin/python benchmarks/bench_store.py --only-inspect --inspect-n 200000 --pg URL --raw store_inspect

Goals (issue 14, item 8): on a 200,000-program run ``archive stats``, ``lineage export
--format graphml`` and ``lineage tree --depth 50 --top 1000`` each <= 3 s and <= 300 MB (peak
RSS of the command's process), measured as real ``qdevolve`` processes (``--inspect-n``).

Goals (issue 2): insert >= 20,000 programs/s (each with its parent edge and an evaluation,
batched); ancestry of a 5,000-deep chain < 50 ms; networkx graph of a 100,000-program run
< 3 s; GraphML export of it < 10 s. Programs are built before the clock starts, so the
insert figure is the store's cost (row building, JSON, SQL), not ``Program``'s hashing.

Every measurement is taken ``--repeats`` times: the in-process ones on a fresh store per
repeat (the programs rebuilt, untimed), the inspection commands on one store of
``--inspect-n`` programs built once and then run in turn, one round per repeat. The raw file
``benchmarks/results/store.json`` (``--raw NAME`` for another) holds every repeat's wall and
CPU seconds, counts, bytes and peak RSS, and the goal of each row; it is rewritten after every
repeat. Its tables are rendered by ``benchmarks/reports/store.py``; those of ``--only-inspect --raw
store_inspect`` (the Scale-out section) by ``benchmarks/reports/store_inspect.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _raw import start_meta, write_raw  # noqa: E402

from qdevolve.db import lineage as L  # noqa: E402
from qdevolve.db.store import LineageStore  # noqa: E402
from qdevolve.types import EvalResult, Program  # noqa: E402

ANCESTRY_CALLS = 7  # timed calls per repeat; a repeat's figure is their median

# The goals of issue 2 (in-process, SQLite) and issue 14 (inspection commands, either database),
# each for the sizes it was stated for ("applies_to": the row's own fields must match).
GOALS: dict[str, list[dict[str, Any]]] = {
    "insert": [{"metric": "programs_per_s", "op": ">=", "value": 20_000, "unit": "programs/s",
                "applies_to": {"programs": 100_000}}],
    "ancestry": [{"metric": "wall_ms", "op": "<", "value": 50, "unit": "ms", "applies_to": {"depth": 5_000}}],
    "graph": [{"metric": "wall_s", "op": "<", "value": 3, "unit": "s", "applies_to": {"programs": 100_000}}],
    "export:graphml": [{"metric": "wall_s", "op": "<", "value": 10, "unit": "s",
                        "applies_to": {"programs": 100_000}}],
    "inspect": [{"metric": "wall_s", "op": "<=", "value": 3, "unit": "s", "applies_to": {"programs": 200_000}},
                {"metric": "peak_rss_mb", "op": "<=", "value": 300, "unit": "MB",
                 "applies_to": {"programs": 200_000}}],
}


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


def _row(kind: str, backend: str, repeat: int, goals: str | None = None, **fields: Any) -> dict[str, Any]:
    """One measurement of one repeat, with the goals that apply to its kind and the load now."""
    row = {"kind": kind, "backend": backend, "repeat": repeat, **fields,
           "loadavg": round(os.getloadavg()[0], 2), "goals": GOALS.get(goals or kind, []) if backend == "sqlite"
           or kind == "inspect" else []}
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}


def _chain(store: LineageStore, depth: int) -> Program:
    crid = store.create_run(name="chain")
    cprogs, prev = [], ()
    for i in range(depth):
        p = Program(code=f"v = {i}\n", run_id=crid, parent_ids=prev, generation=i)
        cprogs.append(p)
        prev = (p.id,)
    store.write(programs=cprogs)
    return cprogs[-1]


def _insert(store: LineageStore, n: int, batch: int) -> tuple[str, _Clock]:
    rid = store.create_run(name="bench")
    progs, results = build_programs(rid, n)
    with _Clock() as ck:
        for i in range(0, n, batch):
            store.write(programs=progs[i:i + batch],
                        evaluations=[(p.id, r) for p, r in zip(progs[i:i + batch], results[i:i + batch], strict=True)])
    return rid, ck


def _ancestry(store: LineageStore, last: Program, depth: int) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for _ in range(ANCESTRY_CALLS):
        with _Clock() as ck:
            got = L.ancestry(store, last.id)
        walls.append(round(ck.wall, 6))
        cpus.append(round(ck.cpu, 6))
    assert len(got) == depth
    return walls, cpus


def bench(n: int, batch: int, chain: int, workdir: Path, repeat: int) -> list[dict[str, Any]]:
    """The in-process SQLite measurements of one repeat, on a fresh store in ``workdir``."""
    store = LineageStore(workdir / "bench.sqlite", create=True)
    rid, ck = _insert(store, n, batch)
    rows = [_row("insert", "sqlite", repeat, programs=n, batch=batch, wall_s=ck.wall, cpu_s=ck.cpu)]
    walls, cpus = _ancestry(store, _chain(store, chain), chain)
    rows.append(_row("ancestry", "sqlite", repeat, depth=chain, call_wall_s=walls, call_cpu_s=cpus))
    with _Clock() as ck:
        g = L.run_graph(store, rid)
    rows.append(_row("graph", "sqlite", repeat, programs=n, wall_s=ck.wall, cpu_s=ck.cpu,
                     nodes=g.number_of_nodes(), edges=g.number_of_edges()))
    for fmt in ("graphml", "json", "dot"):
        out = workdir / f"run.{fmt}"
        with _Clock() as ck:
            L.export(g, out, fmt)
        rows.append(_row("export", "sqlite", repeat, goals=f"export:{fmt}", format=fmt, programs=n,
                         wall_s=ck.wall, cpu_s=ck.cpu, bytes=out.stat().st_size))
    store.close()
    wall, peak, lines, cpu = _command(["lineage", "tree", "--db", str(workdir / "bench.sqlite"), "--run", rid,
                                       "--depth", "3", "--top", "5"])
    rows.append(_row("tree_process", "sqlite", repeat, programs=n, depth=3, top=5, wall_s=wall, cpu_s=cpu,
                     peak_rss_mb=peak, lines=lines))
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


INSPECT = (
    ("archive stats", lambda db, rid, d: ["archive", "stats", "--db", db, "--run", rid]),
    ("lineage export --format graphml", lambda db, rid, d: ["lineage", "export", "--db", db, "--run", rid,
                                                            "--format", "graphml", "--out", f"{d}/run.graphml"]),
    ("lineage tree --depth 50 --top 1000", lambda db, rid, d: ["lineage", "tree", "--db", db, "--run", rid,
                                                               "--depth", "50", "--top", "1000"]),
)


def prepare_inspect(target: str, n: int) -> tuple[str, int]:
    """A run of ``n`` programs stored as the engine would (untimed); its id and the replay tail."""
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
    return rid, tail


def bench_inspect(target: str, rid: str, tail: int, n: int, backend: str, repeat: int) -> list[dict[str, Any]]:
    """One round of the inspection commands on the prepared run, each a fresh process."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="qdevolve-bench-out-") as d:
        for name, argv in INSPECT:
            wall, peak, lines, cpu = _command(argv(target, rid, d))
            extra = {"replayed": tail} if name == "archive stats" else {}
            rows.append(_row("inspect", backend, repeat, command=name, programs=n, wall_s=wall, cpu_s=cpu,
                             peak_rss_mb=peak, lines=lines, **extra))
    return rows


def _drop_pg(url: str) -> None:
    from sqlalchemy import create_engine

    from qdevolve.db import schema as S

    eng = create_engine(url)
    S.metadata.drop_all(eng)
    eng.dispose()


def bench_postgres(url: str, n: int, batch: int, chain: int, repeat: int) -> list[dict[str, Any]]:
    """The insert, ancestry and graph figures on PostgreSQL (the database is emptied first)."""
    _drop_pg(url)
    store = LineageStore(url, create=True)
    rid, ck = _insert(store, n, batch)
    rows = [_row("insert", "postgresql", repeat, programs=n, batch=batch, wall_s=ck.wall, cpu_s=ck.cpu)]
    walls, cpus = _ancestry(store, _chain(store, chain), chain)
    rows.append(_row("ancestry", "postgresql", repeat, depth=chain, call_wall_s=walls, call_cpu_s=cpus))
    with _Clock() as ck:
        g = L.run_graph(store, rid)
    rows.append(_row("graph", "postgresql", repeat, programs=n, wall_s=ck.wall, cpu_s=ck.cpu,
                     nodes=g.number_of_nodes(), edges=g.number_of_edges()))
    store.close()
    _drop_pg(url)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="programs in the big run")
    ap.add_argument("--batch", type=int, default=5_000, help="programs per write() transaction")
    ap.add_argument("--chain", type=int, default=5_000, help="depth of the ancestry chain")
    ap.add_argument("--repeats", type=int, default=3, help="times every measurement is taken")
    ap.add_argument("--raw", default="store", help="raw file name under benchmarks/results/")
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)  # the markdown report is gone
    ap.add_argument("--pg", default=os.environ.get("QDEVOLVE_BENCH_PG_URL"),
                    help="also measure this PostgreSQL URL (its qdevolve tables are dropped!)")
    ap.add_argument("--pg-n", type=int, default=20_000, help="programs for the PostgreSQL run")
    ap.add_argument("--inspect-n", type=int, default=200_000,
                    help="programs of the run the inspection commands are timed on (0: skip)")
    ap.add_argument("--only-inspect", action="store_true", help="only the inspection commands")
    args = ap.parse_args()
    if args.out is not None:
        ap.error("--out: markdown is no longer written; the raw file is benchmarks/results/<--raw>.json and "
                 "benchmarks/report.py renders its tables")
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    meta = start_meta()
    argv = [a.replace(args.pg, "URL") if args.pg else a for a in sys.argv[1:]]  # no credentials in the raw file
    command = " ".join([Path(sys.executable).name, "benchmarks/bench_store.py", *argv])
    settings = {"n": args.n, "batch": args.batch, "chain": args.chain, "ancestry_calls": ANCESTRY_CALLS,
                "repeats": args.repeats, "inspect_n": args.inspect_n, "only_inspect": args.only_inspect,
                "pg": bool(args.pg), "pg_n": args.pg_n if args.pg else None, "sqlite": sqlite3.sqlite_version}
    rows: list[dict[str, Any]] = []

    def save() -> None:
        write_raw(args.raw, {"settings": settings, "rows": rows}, command=command,
                  seeds=[0], meta=meta)  # build_programs' seed

    with tempfile.TemporaryDirectory(prefix="qdevolve-bench-") as d:
        if not args.only_inspect:
            for k in range(args.repeats):
                with tempfile.TemporaryDirectory(dir=d) as rd:
                    rows += bench(args.n, args.batch, args.chain, Path(rd), k)
                if args.pg:
                    rows += bench_postgres(args.pg, args.pg_n, args.batch, args.chain, k)
                save()
        targets = []
        if args.inspect_n:
            targets.append(("sqlite", str(Path(d) / "inspect.sqlite")))
        if args.inspect_n and args.pg:
            targets.append(("postgresql", args.pg))
        for backend, target in targets:
            if backend == "postgresql":
                _drop_pg(target)
            rid, tail = prepare_inspect(target, args.inspect_n)
            for k in range(args.repeats):
                rows += bench_inspect(target, rid, tail, args.inspect_n, backend, k)
                save()
            if backend == "postgresql":
                _drop_pg(target)
    save()
    sys.path.insert(0, str(ROOT / "benchmarks" / "reports"))
    from store import render  # the tables BENCHMARKS.md shows

    out = render(json.loads((ROOT / "benchmarks" / "results" / f"{args.raw}.json").read_text()))
    print("\n\n".join(out.values()))


if __name__ == "__main__":
    main()
