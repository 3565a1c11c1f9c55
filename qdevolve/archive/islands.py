"""Islands: N independent sub-archives joined by ring migration.

The island model (FunSearch, Romera-Paredes et al. 2023; OpenEvolve; ShinkaEvolve) keeps
sub-populations apart so they explore different regions, and lets good programs travel
slowly between them. Each island here is its own inner archive (any archive type). A
program goes to island ``program.island``; a program with no parents (the seed) goes to
every island when ``seed_all_islands`` is set, so no island starts empty.

Migration is ring-shaped and deterministic: every ``migration_interval`` programs offered
to island ``i`` (any status), the top ``ceil(migration_fraction * size)`` elites of island
``i`` by score (the older first among equals) are offered to island ``(i + 1) % n``.
Elites that themselves arrived by migration never migrate again, and a program whose
``code_hash`` is already present on the target island is never copied (OpenEvolve added
both rules after runs filled up with duplicate migrants). A migrant keeps its program id,
so no new program rows are needed; the target's events come back with kind ``migrated``,
``island`` set to the target and ``data = {"from_island": i, "inner_kind": ...}``. All of
this happens inside ``add``, so replaying adds replays migrations.

Statistics: ``size``, ``qd_score`` are summed over islands (a migrant counts on every
island that holds it), ``coverage`` is the mean island coverage, ``best_*`` the best over
islands; ``islands`` lists every island's own statistics.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from qdevolve import registry
from qdevolve.archive.base import EmptyArchiveError, admissible_score, qd_score
from qdevolve.errors import ConfigError
from qdevolve.selection.inspirations import sample_inspirations
from qdevolve.types import ArchiveEvent, Elite, EvalResult, Program

__all__ = ["IslandsArchive"]


@registry.archive("islands")
class IslandsArchive:
    """``n_islands`` inner archives with ring migration.

    Args:
        inner: Spec of each island's archive (``{"type": "map_elites", ...kwargs}``).
        n_islands: Number of islands.
        migration_interval: Programs offered to an island between its migrations
            (0 disables migration).
        migration_fraction: Fraction of an island's elites (rounded up) that migrate.
        seed_all_islands: Put programs without parents on every island.
        **inner_options: Any other option is passed to the inner archive, so
            ``{type: islands, n_islands: 4, bins: 8}`` gives four 8-bin MAP-Elites grids.

    Raises:
        ConfigError: an option is invalid, or a program names an island that does not exist.
    """

    name = "islands"

    def __init__(self, *, inner: dict[str, Any] | str | None = None, n_islands: int = 4,
                 migration_interval: int = 10, migration_fraction: float = 0.1,
                 seed_all_islands: bool = True, **inner_options: Any) -> None:
        if int(n_islands) < 1:
            raise ConfigError(f"islands n_islands must be >= 1, got {n_islands}")
        if int(migration_interval) < 0:
            raise ConfigError(f"islands migration_interval must be >= 0, got {migration_interval}")
        if not 0.0 <= float(migration_fraction) <= 1.0:
            raise ConfigError(f"islands migration_fraction must be in [0, 1], got {migration_fraction}")
        spec: dict[str, Any] = {"type": "map_elites"} if inner is None else (
            {"type": inner} if isinstance(inner, str) else dict(inner))
        spec.update(inner_options)
        if spec.get("type") == "islands":
            raise ConfigError("islands cannot nest another islands archive as inner")
        self.inner_spec = spec
        self.n_islands = int(n_islands)
        self.migration_interval = int(migration_interval)
        self.migration_fraction = float(migration_fraction)
        self.seed_all_islands = bool(seed_all_islands)
        self.islands = [registry.archive.create(spec) for _ in range(self.n_islands)]
        for i, arc in enumerate(self.islands):
            arc.island = i
        self.qd_offset = float(getattr(self.islands[0], "qd_offset", 0.0))
        self._offered = [0] * self.n_islands
        self._migrants: set[tuple[int, str]] = set()  # (island, program id) that arrived by migration
        self.n_migrations = 0

    owns_state = True

    @property
    def state_complete(self) -> bool:
        """True when every island's archive owns its state (:meth:`state` is then complete)."""
        return all(type(a).__dict__.get("owns_state", False) for a in self.islands)

    def state(self) -> dict[str, Any]:
        """The whole state (every island's, the migration counters and migrants), JSON-ready;
        the islands' children counts are stored once when they agree (the usual case)."""
        isl = self.islands
        shared = all(a._children == isl[0]._children for a in isl[1:])
        islands = [a.state() for a in isl]
        if shared:
            for st in islands:
                st.pop("children")
        return {"kind": "islands", "offered": list(self._offered), "n_migrations": self.n_migrations,
                "migrants": sorted([i, pid] for i, pid in self._migrants),
                "children": [list(isl[0]._children), list(isl[0]._children.values())] if shared else None,
                "islands": islands}

    def load_state(self, state: dict[str, Any]) -> None:
        """Load :meth:`state` output into this new archive.

        Raises:
            ValueError: another kind, or another number of islands.
        """
        if state.get("kind") != "islands" or len(state["islands"]) != len(self.islands):
            raise ValueError("the state's islands do not match this archive")
        for a, st in zip(self.islands, state["islands"], strict=True):
            a.load_state(st if state["children"] is None else {**st, "children": state["children"]})
        self._offered = [int(x) for x in state["offered"]]
        self.n_migrations = int(state["n_migrations"])
        self._migrants = {(int(i), pid) for i, pid in state["migrants"]}

    # -- writing ------------------------------------------------------------------------
    def add(self, program: Program, result: EvalResult) -> list[ArchiveEvent]:
        """Offer a program to its island (all islands for a seed); may trigger migration."""
        if not program.parent_ids and self.seed_all_islands:
            targets = list(range(self.n_islands))
        else:
            if not 0 <= program.island < self.n_islands:
                raise ConfigError(
                    f"program {program.id} is on island {program.island} but the islands archive "
                    f"has {self.n_islands} islands (0..{self.n_islands - 1})"
                )
            targets = [program.island]
            check = getattr(self.islands[program.island], "extractor", None)
            if check is not None and admissible_score(result) is not None \
                    and self.islands[program.island].get(program.id) is None:
                check(program, result)  # an unplaceable program raises before any island changes
        for i, arc in enumerate(self.islands):
            if i not in targets:
                arc.count_children(program.parent_ids)
        events: list[ArchiveEvent] = []
        for i in targets:
            for ev in self.islands[i].add(program, result):
                ev.archive = self.name
                events.append(ev)
            self._offered[i] += 1
            if self.migration_interval and self._offered[i] % self.migration_interval == 0:
                events += self._migrate(i)
        return events

    def _migrate(self, src: int) -> list[ArchiveEvent]:
        dst = (src + 1) % self.n_islands
        if dst == src or self.migration_fraction <= 0:
            return []
        source, target = self.islands[src], self.islands[dst]
        pool = [e for e in source.elites() if (src, e.program_id) not in self._migrants]
        n = math.ceil(self.migration_fraction * len(pool))
        ranked = sorted(range(len(pool)), key=lambda i: (-pool[i].score, i))[:n]
        events: list[ArchiveEvent] = []
        for i in ranked:
            elite = pool[i]
            present = {e.code_hash for e in target.elites()}
            if elite.code_hash in present or target.get(elite.program_id) is not None:
                continue
            copy = dataclasses.replace(elite, features=dict(elite.features), island=dst, cell=None)
            for ev in target.insert_elite(copy):
                if ev.program_id == elite.program_id and ev.kind in ("added", "improved", "replaced"):
                    self._migrants.add((dst, elite.program_id))
                    self.n_migrations += 1
                    ev.data = {**ev.data, "from_island": src, "inner_kind": ev.kind}
                    ev.kind = "migrated"
                ev.archive = self.name
                events.append(ev)
        return events

    def count_children(self, parent_ids: tuple[str, ...]) -> None:
        for arc in self.islands:
            arc.count_children(parent_ids)

    # -- reading ------------------------------------------------------------------------
    def _check_island(self, island: int) -> None:
        if not 0 <= island < self.n_islands:
            raise ConfigError(f"island {island} does not exist; the archive has {self.n_islands} islands")

    def elites(self, island: int | None = None) -> list[Elite]:
        """Elites of one island, or of all islands (a migrant listed once, from its first island)."""
        if island is not None:
            self._check_island(island)
            return self.islands[island].elites()
        seen: set[str] = set()
        out = []
        for arc in self.islands:
            for e in arc.elites():
                if e.program_id not in seen:
                    seen.add(e.program_id)
                    out.append(e)
        return out

    def get(self, program_id: str) -> Elite | None:
        for arc in self.islands:
            e = arc.get(program_id)
            if e is not None:
                return e
        return None

    def __len__(self) -> int:
        return len(self.elites())

    def sample(self, rng: np.random.Generator, selection: Any, *, island: int | None = None,
               n: int = 1) -> list[Elite]:
        """``selection.select`` over the elites of ``island`` (or all islands)."""
        candidates = self.elites(island)
        if not candidates:
            where = "the islands archive" if island is None else f"island {island} of the islands archive"
            raise EmptyArchiveError(
                f"{where} holds no elite to select a parent from: no program has been admitted there yet"
            )
        return list(selection.select(candidates, rng, n))

    def inspirations(self, parent_id: str, rng: np.random.Generator, *, n_best: int, n_diverse: int,
                     island: int | None = None) -> list[Elite]:
        return sample_inspirations(self.elites(island), parent_id, rng, n_best=n_best, n_diverse=n_diverse)

    def stats(self) -> dict[str, Any]:
        per = []
        for i, arc in enumerate(self.islands):
            s = arc.stats()
            s["island"] = i
            s["offered"] = self._offered[i]
            per.append(s)
        bests = [s for s in per if s["best_score"] is not None]
        best = max(bests, key=lambda s: s["best_score"], default=None)
        return {
            "archive": self.name,
            "inner": self.inner_spec.get("type"),
            "size": sum(s["size"] for s in per),
            "unique_programs": len(self.elites()),
            "cells": sum(s["cells"] or 0 for s in per) or None,
            "coverage": float(np.mean([s["coverage"] for s in per])),
            "qd_score": qd_score([s["qd_score"] for s in per]),  # finite even when islands saturate
            "qd_offset": self.qd_offset,
            "best_score": None if best is None else best["best_score"],
            "best_program_id": None if best is None else best["best_program_id"],
            "best_island": None if best is None else best["island"],
            "migrations": self.n_migrations,
            "offered": sum(self._offered),
            "islands": per,
        }
