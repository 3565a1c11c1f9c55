"""Evolving prompts end to end: a real OpenAI-compatible HTTP server (a scripted model),
the real backend, operators, sandbox and SQLite store; template lineage, refused templates,
and resume after SIGKILL rebuilding the population from the store."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.core.prompt_population import replay_population
from qdevolve.evolve.setup.example import load_example
from qdevolve.testing.scripted_server import ScriptedServer
from qdevolve.testing.scripts import ScriptedModel, prompt_of

ROOT = Path(__file__).resolve().parents[2]
CIRCLES = ROOT / "examples" / "circle_packing"
META = "Rewrite the instructions of this prompt template"


class TemplateScript:
    """A scripted model that also answers meta-prompts: alternately a valid rewrite (one
    sentence added) and one that drops ``{current_program}`` or smuggles ``{x.__class__}``."""

    def __init__(self) -> None:
        self.model, self.meta = ScriptedModel(seed=0), 0

    def __call__(self, req: dict[str, Any]) -> str:
        text = prompt_of(req)
        if META not in text:
            return self.model(req)
        self.meta += 1
        template = re.search(r"<<<TEMPLATE\n(.*)\nTEMPLATE>>>", text, re.DOTALL).group(1)
        if self.meta % 3 == 1:
            new = template + f"\nMODEL-SENTENCE-{self.meta}: change one constant at a time."
        elif self.meta % 3 == 2:
            new = template.replace("{current_program}", "(program omitted)")
        else:
            new = template + "\n{current_program.__class__.__init__}"
        return f"Here it is.\n<<<TEMPLATE\n{new}\nTEMPLATE>>>\nDone."


def _config(url: str, iterations: int, **prompt: Any):
    ex = load_example(CIRCLES)
    return ex, ex.config.with_overrides(
        iterations=iterations, workers=1, seed=3, max_pending=1,
        backend={"type": "openai", "api_base": url, "model": "scripted"}, mutation=[{"type": "diff"}],
        prompt={**ex.config.prompt, "evolve": True, **prompt})


@pytest.mark.slow
def test_offline_template_lineage_is_stored_and_memory_matches_the_store(tmp_path: Path) -> None:
    db = tmp_path / "run.sqlite"
    with ScriptedServer(ScriptedModel(seed=0)) as server:
        ex, cfg = _config(server.url, 12, every=3, population=2, template_mutator="offline")
        store = LineageStore(db)
        evo = Evolution.start(ex, cfg, store, progress=False)
        evo.run()
        evo.close()
    con = sqlite3.connect(db)
    rows = con.execute("SELECT id, parent_id, origin, status, text FROM prompt_templates ORDER BY seq").fetchall()
    assert rows[0][1:3] == (None, "seed") and len(rows) >= 4, rows
    ids = {r[0] for r in rows}
    assert all(r[1] in ids for r in rows[1:]), "every mutated template names a stored parent"
    kids = con.execute("SELECT json_extract(p.metadata, '$.template_id'), r.prompt, "
                       "json_extract(r.metadata, '$.template_id') FROM programs p "
                       "JOIN rollouts r ON r.program_id = p.id WHERE p.operator = 'diff'").fetchall()
    assert len(kids) == 12 and all(t in ids and t == rt for t, _p, rt in kids), "each child names its template"
    texts = dict((r[0], r[4]) for r in rows)
    for tid, prompt, _ in kids:  # the template a child names is the one its prompt was made from
        tail = texts[tid].rstrip().split("\n")[-1]
        assert tail in prompt
    used = {t for t, _p, _r in kids}
    assert any(texts[t] != texts[rows[0][0]] for t in used), "evolved templates were used"
    rebuilt, children = replay_population(store, evo.run_id)
    assert rebuilt.summary() == evo.prompts.population.summary(), "memory holds what the store holds"
    assert sum(map(len, children.values())) == 12
    out = subprocess.run([sys.executable, "-m", "qdevolve", "lineage", "templates", "--db", str(db)],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and rows[1][0][:12] in out.stdout and "offline" in out.stdout, out.stderr
    pid = con.execute("SELECT id FROM programs WHERE operator = 'diff' LIMIT 1").fetchone()[0]
    out = subprocess.run([sys.executable, "-m", "qdevolve", "lineage", "show", pid, "--db", str(db)],
                         capture_output=True, text=True, cwd=ROOT)
    assert "template  " in out.stdout, out.stdout[:500]


@pytest.mark.slow
def test_model_templates_are_validated_and_refusals_recorded(tmp_path: Path) -> None:
    db = tmp_path / "run.sqlite"
    script = TemplateScript()
    with ScriptedServer(script) as server:
        ex, cfg = _config(server.url, 14, every=2, population=3)  # model mutator: the default with a backend
        store = LineageStore(db)
        evo = Evolution.start(ex, cfg, store, progress=False)
        evo.run()
        evo.close()
    con = sqlite3.connect(db)
    rows = con.execute("SELECT origin, status, reason, text FROM prompt_templates WHERE origin != 'seed' "
                       "ORDER BY seq").fetchall()
    assert script.meta >= 3 and len(rows) == script.meta
    assert {r[0] for r in rows} == {"model"}
    by = {r[1] for r in rows}
    assert by == {"active", "invalid"}
    reasons = " ".join(r[2] or "" for r in rows if r[1] == "invalid")
    assert "{current_program}" in reasons and "not a bare name" in reasons
    invalid_ids = {r[0] for r in con.execute("SELECT id FROM prompt_templates WHERE status = 'invalid'")}
    used = {r[0] for r in con.execute("SELECT json_extract(metadata, '$.template_id') FROM programs")}
    assert not invalid_ids & used, "a refused template never reaches a prompt"
    prompts = [r[0] for r in con.execute("SELECT prompt FROM rollouts")]
    assert any("MODEL-SENTENCE-1" in p for p in prompts), "a valid model template was used"
    assert not any("__class__" in p for p in prompts)
    usage = LineageStore(db).get_state(evo.run_id, "usage")
    calls = sum(m["calls"] for m in usage["models"].values())
    assert calls == script.model.calls + script.meta, "every model call, meta-prompts included, is in the budget"


_RUNNER = r"""
import sys
from pathlib import Path
from qdevolve.db import LineageStore
from qdevolve.evolve.core.engine import Evolution
from qdevolve.evolve.setup.example import load_example
ex = load_example(Path(sys.argv[2]))
cfg = ex.config.with_overrides(iterations=40, workers=1, seed=3, max_pending=1,
    backend={"type": "openai", "api_base": sys.argv[3], "model": "scripted"}, mutation=[{"type": "diff"}],
    prompt={**ex.config.prompt, "evolve": True, "every": 2, "population": 3, "template_mutator": "offline"})
evo = Evolution.start(ex, cfg, LineageStore(sys.argv[1]), progress=False)
evo.run()
"""


@pytest.mark.slow
def test_resume_after_sigkill_rebuilds_the_template_population(tmp_path: Path) -> None:
    db, script = tmp_path / "run.sqlite", tmp_path / "runner.py"
    script.write_text(_RUNNER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with ScriptedServer(ScriptedModel(seed=0), latency_s=0.05) as server:
        proc = subprocess.Popen([sys.executable, str(script), str(db), str(CIRCLES), server.url], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 120
        while time.time() < deadline:  # kill once a few templates and children are stored
            time.sleep(0.3)
            try:
                con = sqlite3.connect(db)
                n = con.execute("SELECT COUNT(*) FROM prompt_templates").fetchone()[0]
                con.close()
            except sqlite3.Error:
                continue
            if n >= 4:
                break
        assert proc.poll() is None, proc.communicate()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        store = LineageStore(db)
        rid = store.latest_run_id()
        before, _ = replay_population(store, rid)
        assert store.count_evaluations(rid) < 41, "killed mid-run"
        evo = Evolution.resume(store, rid, progress=False)
        assert evo.prompts.population.summary() == before.summary(), "resume rebuilds the population exactly"
        assert evo.prompts.pending() == [], "nothing stored is made again"
        evo.close()
        out = subprocess.run([sys.executable, "-m", "qdevolve", "resume", "--db", str(db), "--no-progress",
                              "--trust", "backend.api_base"],
                             capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    con = sqlite3.connect(db)
    n_kids = con.execute("SELECT COUNT(*) FROM programs WHERE operator = 'diff'").fetchone()[0]
    assert n_kids == 40
    ids = [r[0] for r in con.execute("SELECT id FROM prompt_templates")]
    assert len(ids) == len(set(ids))
    seeds = con.execute("SELECT COUNT(*) FROM prompt_templates WHERE origin = 'seed'").fetchone()[0]
    assert seeds == 1, "resume does not make a second seed template"
    orphans = con.execute("SELECT COUNT(*) FROM programs WHERE json_extract(metadata, '$.template_id') "
                          "NOT IN (SELECT id FROM prompt_templates)").fetchone()[0]
    assert orphans == 0
    after, kids = replay_population(LineageStore(db), rid)
    made = sum(1 for t in after.templates.values() if t.origin != "seed")
    assert made == sum(map(len, kids.values())) // 2 or made == sum(map(len, kids.values())) // 2 - 1


@pytest.mark.parametrize("prompt, message", [
    ({"evolve": True}, "--mutation ast builds no prompt"),
    ({"evolve": "yes"}, "prompt.evolve must be true or false"),
])
def test_bad_prompt_evolution_config_is_refused(prompt: dict, message: str) -> None:
    from qdevolve.errors import ConfigError
    from qdevolve.evolve.core.breeder import build_operators
    from qdevolve.evolve.core.prompt_population import PromptEvolution

    ex = load_example(CIRCLES)
    ops, _w, _n = build_operators(ex.config.with_overrides(mutation=[{"type": "ast"}], backend=None))
    with pytest.raises(ConfigError, match=re.escape(message)):
        PromptEvolution.from_config(prompt, ops, {}, has_backend=False)


@pytest.mark.parametrize("key, value", [("every", 0), ("population", -1), ("every", True), ("explore", "lots")])
def test_bad_schedule_values_name_the_field(key: str, value: object) -> None:
    from qdevolve.errors import ConfigError
    from qdevolve.evolve.core.breeder import build_operators
    from qdevolve.evolve.core.prompt_population import PromptEvolution

    ex = load_example(CIRCLES)
    ops, _w, _n = build_operators(ex.config.with_overrides(mutation=[{"type": "diff"}],
                                                           backend={"type": "openai", "model": "m"}))
    with pytest.raises(ConfigError, match=f"prompt.{key}"):
        PromptEvolution.from_config({"evolve": True, key: value}, ops, {}, has_backend=True)
