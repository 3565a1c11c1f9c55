"""Migration between the runs of a budget pool, through the database (islands on several machines).

The runs of one ``budget_pool`` are islands driven by separate controllers (each its own
run, archive, seed and writer lease; see ``docs/scale.md``). With ``run.pool_migration`` set
they exchange elites the way :class:`~qdevolve.archive.islands.IslandsArchive` does inside
one process, but through the shared database instead of memory:

* **Publish.** Every ``interval`` children a controller stores, it publishes the top
  ``count`` elites of its archive by score (the older first among equals) that it has not
  published before; its own seeds and programs that reached it by migration never are.
  A migrant is a ``run_state`` row of the pool's counter id ``pool:<name>``, key
  ``migrant/<program id>``, value ``{"from_run", "island", "score", "code_hash"}`` (an
  upsert: publishing again is harmless).
* **Pick up.** After each child it stores, a controller reads the pool's migrants that
  other runs published and that no run has taken yet, offers each one to its archive
  (island ``island mod n_islands``) and **takes** it with the store's ``take_migrant``: in
  one transaction the claim (``claim/<program id>`` in the pool's rows, see
  :func:`qdevolve.db.claims.claim_program`: the primary key makes exactly one controller the
  taker), the archive events, kind ``migrated`` with ``data = {"from_run", "from_island",
  "inner_kind"}``, and the run-state key ``migration`` (published, received and skipped
  ids). A migrant whose code hash the run already holds is taken and skipped (OpenEvolve's
  rule against duplicate migrants). When another controller took it first nothing is
  written and the archive is put back as the store holds it (the ``reload`` callback).

* **Re-evaluated before it counts.** A migrant's score comes from the publisher's evaluator,
  and the publisher may be any run of the pool (an example directory whose own evaluator
  says what it likes). When the engine gives an ``evaluate`` callable, as it always does,
  the receiving run evaluates the migrant's code with its *own* evaluator and sandbox first;
  only that result enters its archive, and it is stored in the run-state key ``migration``
  (``results``, by program id) in the same transaction as the claim, so a resume places the
  migrant with the receiver's result again. A migrant that its evaluator does not score
  ``ok`` is taken and skipped.

The program row stays in the run that bred it (its lineage is there); the receiving run
references it by id. A controller killed at any moment has taken a migrant whole (claim,
events and state) or not at all; a claim without its events (written by a version that
claimed in a transaction of its own) is found on resume and delivered then. On resume the
received migrants are offered again after the run's own children are replayed (for
MAP-Elites the cell elites are the same whatever the order; ties may differ).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from qdevolve.errors import ConfigError, QdevolveError
from qdevolve.types import ArchiveEvent, EvalResult, Program

__all__ = ["PoolMigration", "MigrantStore", "MIGRANT_PREFIX", "parse_pool_migration", "migrants_of"]

MIGRANT_PREFIX = "migrant/"
_KEYS = ("interval", "count")


class MigrantStore(Protocol):
    """The store methods migration uses (:class:`~qdevolve.db.store.LineageStore` has them);
    every transaction and every statement is the store's."""

    def get_state(self, run_id: str, key: str, default: Any = None) -> Any: ...

    def publish_migrants(self, pool: str, run_id: str, migrants: dict[str, dict[str, Any]],
                         migration: dict[str, Any]) -> None: ...

    def pool_migrants(self, pool: str) -> tuple[dict[str, dict[str, Any]], dict[str, str | None]]: ...

    def take_migrant(self, pool: str, program_id: str, controller: str, *, run_id: str,
                     events: Any = (), state: dict[str, Any] | None = None) -> bool: ...


def parse_pool_migration(options: Any, *, pool: str | None, need_pool: bool = True) -> tuple[int, int] | None:
    """``(interval, count)`` from ``run.pool_migration`` (``None``: migration off).

    Raises:
        ConfigError: an unknown key, a value that is not a positive integer, or migration
            without ``run.budget_pool`` (the pool names the runs that exchange migrants).
    """
    if not options:
        return None
    if not isinstance(options, dict) or set(options) - set(_KEYS):
        raise ConfigError(f"run.pool_migration: expected a mapping with keys {', '.join(_KEYS)}, got {options!r}")
    if pool is None and need_pool:
        raise ConfigError("run.pool_migration needs run.budget_pool (--budget-pool NAME): the pool names "
                          "the runs that exchange migrants")
    out = []
    for key, default in (("interval", 10), ("count", 2)):
        v = options.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"run.pool_migration.{key}: expected an integer >= 1, got {v!r}")
        out.append(v)
    return out[0], out[1]


class PoolMigration:
    """One controller's side of the pool's migration (module docstring).

    Args:
        store: The run's store (:class:`MigrantStore`).
        run_id: The run (the controller's name in claims).
        pool: The pool's budget counter id, ``pool:<name>``.
        interval: Publish every this many stored children.
        count: Elites published each time.
        archive: The run's archive (``add``, ``elites``, ``n_islands``).
        program: ``program_id -> (Program, EvalResult)`` (the engine's program cache).
        remember: Called with a received migrant that scored (the engine caches it).
        hashes: Code hashes the run holds; a migrant's hash is added when it is received.
        reload: Puts the run's archive back as the store holds it (and calls
            :meth:`replace_archive`); called when another controller took a migrant this one
            had offered to its archive already.
        evaluate: Evaluates a migrant with the receiving run's own evaluator (blocking);
            ``None`` keeps the publisher's result (only for archives tested on their own).
        evaluate_async: The same, awaitable; with it :meth:`after_child` returns a coroutine
            (the engine awaits hooks), so the event loop runs on while a migrant is evaluated.
    """

    def __init__(self, store: MigrantStore, run_id: str, pool: str, interval: int, count: int, *, archive: Any,
                 program: Callable[[str], tuple[Program, EvalResult]],
                 remember: Callable[[Program, EvalResult], None], hashes: set[str],
                 reload: Callable[[], None], evaluate: Callable[[Program], EvalResult] | None = None,
                 evaluate_async: Callable[[Program], Awaitable[EvalResult]] | None = None) -> None:
        self.store, self.run_id, self.pool = store, run_id, pool
        self.interval, self.count = interval, count
        self.archive, self._program, self._remember, self.hashes = archive, program, remember, hashes
        self._reload = reload
        self._evaluate, self._evaluate_async = evaluate, evaluate_async
        self._in_flight: set[str] = set()  # migrants being evaluated now (hooks of several children overlap)
        state = self.store.get_state(self.run_id, "migration") or {}
        results = state.get("results")
        self.results: dict[str, dict[str, Any]] = dict(results) if isinstance(results, dict) else {}
        self.published: list[str] = list(state.get("published", []))
        self.received: list[str] = list(state.get("received", []))
        self.skipped: list[str] = list(state.get("skipped", []))
        self._since = 0
        self._add_received()

    def _add_received(self) -> None:
        for pid in self.received:  # resume: back into the rebuilt archive (events are stored already)
            prog, res = self._load(pid)
            if pid in self.results:  # the receiver's own result, stored with the claim
                res = EvalResult.from_dict(self.results[pid])
                self._remember(prog, res)
            self.archive.add(prog, res)

    def replace_archive(self, archive: Any) -> None:
        """The engine rebuilt its archive from the store: received migrants go back into it."""
        self.archive = archive
        self._add_received()

    def state(self) -> dict[str, Any]:
        return {"published": self.published, "received": self.received, "skipped": self.skipped,
                "results": self.results}

    # -- the hook ---------------------------------------------------------------------------
    def after_child(self, program: Program, result: EvalResult, candidate: Any = None) -> Awaitable[Any] | None:
        """Publish every ``interval`` children; pick up what other controllers published
        (a coroutine to await when the migrants are evaluated asynchronously)."""
        self._since += 1
        if self._since >= self.interval:
            self._since = 0
            self.publish()
        if self._evaluate_async is not None:
            return self.pick_up_async()
        self.pick_up()
        return None

    def publish(self) -> list[str]:
        """Publish up to ``count`` new elites; returns their ids."""
        done = set(self.published) | set(self.received)
        elites = [e for e in self.archive.elites() if e.program_id not in done and e.score is not None]
        ranked = sorted(range(len(elites)), key=lambda i: (-float(elites[i].score), i))
        out: dict[str, dict[str, Any]] = {}
        for i in ranked:
            if len(out) == self.count:
                break
            e = elites[i]
            prog, _res = self._program(e.program_id)
            if prog.run_id != self.run_id or prog.operator == "seed":
                continue
            out[e.program_id] = {"from_run": self.run_id, "island": int(prog.island), "score": float(e.score),
                                 "code_hash": prog.code_hash}
        if out:
            self.store.publish_migrants(self.pool, self.run_id, out, {**self.state(),
                                                                       "published": self.published + list(out)})
            self.published += list(out)
        return list(out)

    def _offered(self) -> list[tuple[str, dict[str, Any]]]:
        """The pool's migrants this run may take now: published by another run, taken by
        nobody (or claimed by this run and not delivered yet), not being evaluated here."""
        mine = set(self.received) | set(self.skipped) | self._in_flight
        migrants, taken = self.store.pool_migrants(self.pool)
        return [(pid, info) for pid, info in migrants.items()
                if info.get("from_run") != self.run_id and pid not in mine and taken.get(pid, self.run_id) == self.run_id]

    def pick_up(self) -> list[ArchiveEvent]:
        """Claim and place every migrant other runs published that nobody took yet, each
        evaluated by this run's own evaluator first (``evaluate``)."""
        events: list[ArchiveEvent] = []
        for pid, info in self._offered():
            prog, res = self._load(pid)
            if self._duplicate(pid, prog):
                continue
            if self._evaluate is not None:
                res = self._evaluate(prog)
            events += self._receive(pid, info, prog, res)
        return events

    async def pick_up_async(self) -> list[ArchiveEvent]:
        """:meth:`pick_up` with the evaluations awaited (``evaluate_async``)."""
        assert self._evaluate_async is not None
        events: list[ArchiveEvent] = []
        for pid, info in self._offered():
            if pid in self._in_flight or pid in self.received or pid in self.skipped:
                continue  # another child's hook got to it while this one awaited
            prog, _res = self._load(pid)
            if self._duplicate(pid, prog):
                continue
            self._in_flight.add(pid)
            try:
                res = await self._evaluate_async(prog)
            finally:
                self._in_flight.discard(pid)
            if pid in self.received or pid in self.skipped:
                continue
            events += self._receive(pid, info, prog, res)
        return events

    # -- placing one migrant ------------------------------------------------------------------
    def _load(self, pid: str) -> tuple[Program, EvalResult]:
        prog, res = self._program(pid)
        n = int(getattr(self.archive, "n_islands", 1) or 1)
        return dataclasses.replace(prog, island=prog.island % n), res

    def _duplicate(self, pid: str, prog: Program) -> bool:
        """A migrant whose code the run holds already is taken and skipped (no evaluation)."""
        if prog.code_hash not in self.hashes:
            return False
        if self._take(pid, [], {**self.state(), "skipped": self.skipped + [pid]}):
            self.skipped.append(pid)
        return True

    def _receive(self, pid: str, info: dict[str, Any], prog: Program, res: EvalResult) -> list[ArchiveEvent]:
        """Take one migrant with ``res`` (this run's result for it): the claim, its events and
        the ``migration`` state in one store call."""
        kept = {**res.to_dict(), "artifacts": {}}  # the stored result: what the archive needs, bounded
        results = {**self.results, pid: kept} if self._evaluate or self._evaluate_async else self.results
        if not res.ok or res.score is None:
            if self._take(pid, [], {**self.state(), "skipped": self.skipped + [pid], "results": results}):
                self.skipped.append(pid)
                self.results = results
            return []
        try:
            events = self.archive.add(prog, res)
        except QdevolveError:  # this run's archive cannot place it (a feature it lacks): skipped
            self._reload()
            if self._take(pid, [], {**self.state(), "skipped": self.skipped + [pid], "results": results}):
                self.skipped.append(pid)
                self.results = results
            return []
        for ev in events:
            ev.run_id = self.run_id
            if ev.program_id == pid and ev.kind in ("added", "improved", "replaced"):
                ev.data = {**ev.data, "from_run": info.get("from_run"), "from_island": info.get("island"),
                           "inner_kind": ev.kind}
                ev.kind = "migrated"
        if not self._take(pid, events, {**self.state(), "received": self.received + [pid], "results": results}):
            self._reload()  # another controller took it first: the archive as the store holds it
            return []
        self.received.append(pid)
        self.results = results
        self.hashes.add(prog.code_hash)
        if res.ok and res.score is not None:
            self._remember(prog, res)
        return events

    def _take(self, pid: str, events: list[ArchiveEvent], migration: dict[str, Any]) -> bool:
        return self.store.take_migrant(self.pool, pid, self.run_id, run_id=self.run_id, events=events,
                                       state={"migration": migration})


def migrants_of(store: MigrantStore, pool: str) -> list[dict[str, Any]]:
    """Every migrant of pool ``pool`` with its publisher and taker (for tests and inspection)."""
    migrants, taken = store.pool_migrants(f"pool:{pool}")
    return [{"program_id": pid, **info, "taken_by": taken.get(pid)} for pid, info in migrants.items()]
