"""LLM mutations end to end: a real OpenAI-compatible HTTP server on 127.0.0.1 (a scripted
model speaking the protocol), the real backend, operators, sandbox and store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example
from qdevolve.testing.scripted_server import ScriptedServer
from qdevolve.testing.scripts import GARBAGE_MODES, GarbageScript, ScriptedModel

ROOT = Path(__file__).resolve().parents[2]
CIRCLES = ROOT / "examples" / "circle_packing"


def _run(db: Path, url: str, iterations: int, mutation: list[dict], **backend_kw) -> tuple[LineageStore, Evolution]:
    ex = load_example(CIRCLES)
    backend = {"type": "openai", "api_base": url, "model": "scripted", **backend_kw}
    cfg = ex.config.with_overrides(iterations=iterations, workers=2, seed=1, backend=backend, mutation=mutation)
    store = LineageStore(db)
    evo = Evolution.start(ex, cfg, store, progress=False)
    evo.run()
    evo.close()
    return store, evo


@pytest.mark.slow
def test_circle_packing_with_scripted_model(tmp_path: Path) -> None:
    with ScriptedServer(ScriptedModel(seed=0)) as server:
        store, evo = _run(tmp_path / "llm.sqlite", server.url, 30,
                          [{"type": "diff", "weight": 0.5}, {"type": "rewrite", "weight": 0.3},
                           {"type": "crossover", "weight": 0.2}])
    con = sqlite3.connect(tmp_path / "llm.sqlite")
    rows = con.execute("SELECT operator, prompt_hash, json_extract(metadata, '$.usage.completion_tokens'), "
                       "json_extract(metadata, '$.reason') FROM programs WHERE operator != 'seed'").fetchall()
    assert len(rows) == 30
    assert {r[0] for r in rows} == {"diff", "rewrite", "crossover"}
    assert all(r[1] for r in rows), ("every model-made program records its prompt hash",
                                     [r for r in rows if not r[1]])
    assert all((r[2] or 0) > 0 for r in rows), "token usage is stored per program"
    roles = {r[0] for r in con.execute("SELECT DISTINCT role FROM edges")}
    assert {"mutation", "crossover"} <= roles
    n_cross_edges = con.execute("SELECT COUNT(*) FROM edges WHERE role = 'crossover'").fetchone()[0]
    n_cross = sum(r[0] == "crossover" for r in rows)
    assert n_cross_edges == 2 * n_cross, "a crossover child has both parent edges"
    linked = con.execute("SELECT COUNT(*) FROM rollouts r JOIN programs p ON p.id = r.program_id").fetchone()[0]
    assert linked == 30, "every mutation is stored as a rollout linked to its program"
    assert "sk-" not in (tmp_path / "llm.sqlite").read_bytes().decode("latin-1")
    ok = con.execute("SELECT COUNT(*) FROM evaluations WHERE status = 'ok'").fetchone()[0]
    assert ok >= 10


@pytest.mark.slow
@pytest.mark.parametrize("mode", GARBAGE_MODES)
def test_garbage_replies_are_failed_mutations(mode: str, tmp_path: Path) -> None:
    script = GarbageScript(mode, timeout_delay_s=3.0, huge_chars=1_000_000)
    with ScriptedServer(script) as server:
        store, evo = _run(tmp_path / f"{mode}.sqlite", server.url, 4,
                          [{"type": "diff", "weight": 0.5}, {"type": "rewrite", "weight": 0.5}],
                          timeout_s=1.0, retries=1, retry_base_s=0.05)
    con = sqlite3.connect(tmp_path / f"{mode}.sqlite")
    children = con.execute(
        "SELECT e.status, e.error, json_extract(p.metadata, '$.failed_mutation') FROM programs p "
        "JOIN evaluations e ON e.program_id = p.id WHERE p.operator != 'seed'").fetchall()
    assert len(children) == 4, "the run finishes its budget"
    for status, error, failed in children:
        assert status == "invalid" and failed == 1, (mode, status, error)
        assert error and len(error) < 1000, "a one-line reason is stored"
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
