"""The agents follow the run: its model backend while scoring, its sandbox setting, and the
whole example directory hidden (scoring and self-modification alike)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

import qdevolve.agents  # noqa: F401  (registers 'self' and 'agents')
from qdevolve import registry
from qdevolve.agents import AgentScorer, ScoringSettings, load_tasks
from qdevolve.agents.interface import AgentBudget, AgentTask
from qdevolve.agents.runtime import run_agent
from qdevolve.agents.scoring import agent_sandbox
from qdevolve.agents.tools import TaskTools
from qdevolve.mutation.base import MutationContext
from qdevolve.testing.scripted_server import ScriptedServer

from .agents.support import PROGRAM, agent, make_task_dir

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agents"


class Counting:
    """A scripted model that answers every request with a fixed program and counts them."""

    def __init__(self) -> None:
        self.requests = 0

    def __call__(self, request: dict) -> str:
        self.requests += 1
        return "def solve():\n    return 7.0\n"


@pytest.fixture()
def example():
    """A copy of the agents example where no sandbox hides it by default (under /var/lib when
    writable, else the temp dir), so only the hiding under test keeps an agent out of it."""
    base = "/var/lib" if os.access("/var/lib", os.W_OK) else None
    root = Path(tempfile.mkdtemp(prefix="qdevolve-agents-ex-", dir=base))
    os.chmod(root, 0o755)
    ex = root / "agents_ex"
    shutil.copytree(EXAMPLE, ex)
    yield ex
    shutil.rmtree(root, ignore_errors=True)


def _tasks(ex: Path):
    return load_tasks(ex / "tasks", {"bowl": {}, "line_fit": {"heldout": True}})


def _openai(url: str):
    from qdevolve.backends.openai_backend import OpenAIBackend

    return OpenAIBackend(api_base=url, model="scripted")


# -- 1. task scoring gets the run's backend ----------------------------------------------------

def test_scoring_tools_generate_through_the_runs_backend_within_the_budget(example: Path) -> None:
    box = registry.sandbox.create({"type": "local"})
    script = Counting()
    try:
        with ScriptedServer(script, latency_s=0.0) as server:
            scorer = AgentScorer(_tasks(example), ScoringSettings(iterations=1, calls=2, wall_s=20), box,
                                 {"type": "local"}, backend=_openai(server.url))
            task = scorer.tasks[0]
            tools = scorer.tools_factory(task=task, sandbox=box, lineage=[], seed=1, limits=None)
            out = run_agent(agent("generator"), task=AgentTask(name=task.name, description="d"),
                            parent=task.seed_code, feedback={}, tools=tools, budget=scorer.budget, sandbox="local")
    finally:
        box.close()
    assert out.status == "ok", (out.error, out.log)
    report = json.loads(out.child.rsplit("\n# ", 1)[1])
    assert report["answered"] == 2 and "unavailable" not in report, report
    assert script.requests == 2 and out.calls == 2 and out.tokens > 0


def test_concurrent_agent_generate_calls_reach_the_backend_one_at_a_time(example: Path) -> None:
    """Scoring slots and self-modification run in threads, each call on its own event loop: the
    shared backend (which binds one loop at a time) is never used from two loops at once."""
    import threading

    script = Counting()
    with ScriptedServer(script, latency_s=0.15) as server:
        backend = _openai(server.url)
        tools = [TaskTools(example / "evaluator.py", None, backend=backend, seed=i) for i in range(3)]
        out: list = []
        threads = [threading.Thread(target=lambda t=t: out.append(t.generate("x"))) for t in tools]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert server.max_in_flight == 1
    assert len(out) == 3 and all("def solve" in text for text, _ in out)


def test_scoring_is_offline_without_a_backend(example: Path) -> None:
    scorer = AgentScorer(_tasks(example), ScoringSettings(iterations=1), None, {"type": "local"})
    tools = scorer.tools_factory(task=scorer.tasks[0], sandbox=None, lineage=[], seed=1, limits=None)
    with pytest.raises(qdevolve.agents.interface.ToolUnavailable, match="offline"):
        tools.generate("x")


def test_the_executor_hands_its_backend_to_the_scorer(monkeypatch: pytest.MonkeyPatch, example: Path) -> None:
    from qdevolve.agents import executor as executor_module
    from qdevolve.evolve.executors import EvalJob
    from qdevolve.types import EvalResult, Program

    seen = {}

    class Scorer:
        def __init__(self, *args, **kw) -> None:
            seen["backend"] = kw.get("backend")

        def score(self, code: str) -> EvalResult:
            return EvalResult(status="ok", score=0.0)

    monkeypatch.setattr(executor_module, "AgentScorer", Scorer)
    ex = registry.executor.create({"type": "agents", "tasks": ["bowl"]}, slots=1)
    marker = object()
    try:
        ex.use_backend(marker)
        job = EvalJob(program=Program(code=(example / "initial_program.py").read_text()),
                      evaluator=example / "evaluator.py", limits=None, sandbox={"type": "local"})
        assert ex.submit(job).result().result.ok
    finally:
        ex.close()
    assert seen["backend"] is marker


@pytest.mark.slow
def test_an_agents_run_with_a_model_gives_the_executor_the_engines_backend(example: Path, tmp_path: Path) -> None:
    import yaml

    from qdevolve.db import LineageStore
    from qdevolve.evolve.core import Evolution
    from qdevolve.evolve.setup.example import load_example

    config = yaml.safe_load((example / "config.yaml").read_text())
    config["run"].update(iterations=0, workers=1)
    config["run"]["executor_options"].update(tasks={"bowl": {}}, iterations=1, wall_s=20)
    (example / "config.yaml").write_text(yaml.safe_dump(config))
    with ScriptedServer(Counting(), latency_s=0.0) as server:
        ex = load_example(example)
        cfg = ex.config.with_overrides(backend={"type": "openai", "api_base": server.url, "model": "scripted"})
        evo = Evolution.start(ex, cfg, LineageStore(tmp_path / "a.sqlite"), progress=False)
        try:
            assert evo.backend is not None and evo.executor.backend.inner is evo.backend
            assert evo.executor.backend.spender == "agent"  # metered: the run's budget sees the agents' tokens
        finally:
            evo.close()


# -- 2. the agent's sandbox follows the run's ------------------------------------------------------

@pytest.mark.parametrize(("run", "expected"), [("local", "local"), ("bwrap", "bwrap"),
                                               ({"type": "local", "x": 1}, {"type": "local", "x": 1})])
def test_agent_sandbox_keeps_local_and_bwrap(run, expected) -> None:
    assert agent_sandbox(run) == expected


def test_agent_sandbox_of_a_docker_run_is_bwrap_where_available_else_local(monkeypatch) -> None:
    import shutil as sh

    monkeypatch.setattr(sh, "which", lambda name: "/usr/bin/bwrap" if name == "bwrap" else None)
    assert agent_sandbox({"type": "docker", "image": "x"}) == "bwrap"
    monkeypatch.setattr(sh, "which", lambda name: None)
    assert agent_sandbox({"type": "docker", "image": "x"}) == "local"


def test_self_mutation_follows_the_runs_sandbox(monkeypatch, example: Path) -> None:
    from qdevolve.agents import self_mutation
    from qdevolve.evolve.core.plugins import EnginePlugins
    from qdevolve.evolve.setup.example import load_example

    cfg = load_example(example).config.with_overrides(sandbox={"type": "local"})
    plugins = EnginePlugins.build(cfg)
    try:
        op = next(o for o in plugins.operators if isinstance(o, self_mutation.SelfMutation))
        assert op.sandbox_spec["type"] == "local"  # the engine told it
        assert type(op._box()).__name__ == type(registry.sandbox.create({"type": "local"})).__name__
        seen = {}

        def fake_run_agent(code, **kw):
            seen.update(kw)
            from qdevolve.agents.interface import AgentOutcome

            return AgentOutcome("ok", code, 0, 0, 0, 0.0)

        monkeypatch.setattr(self_mutation, "run_agent", fake_run_agent)
        import numpy as np

        from qdevolve.types import Program

        ctx = MutationContext(rng=np.random.default_rng(0), n=1, settings={"example_dir": str(example)})
        op._one(Program(code=PROGRAM), ctx, None, [], 0)
        assert seen["sandbox"]["type"] == "local"
        assert str(example.resolve()) in seen["tools"].private_paths
    finally:
        plugins.close()


# -- 3. TaskTools hides what it is told ----------------------------------------------------------

def test_tasktools_hides_the_given_paths_and_always_the_evaluators_directory(tmp_path: Path) -> None:
    task = make_task_dir()
    try:
        assert TaskTools(task / "evaluator.py", None).private_paths == (str(task.resolve()),)
        other = tmp_path / "elsewhere"
        hidden = TaskTools(task / "evaluator.py", None, hide=[other]).private_paths
        assert set(hidden) == {str(other.resolve()), str(task.resolve())}
        whole = TaskTools(task / "evaluator.py", None, hide=[task.parent]).private_paths
        assert whole == (str(task.parent.resolve()),)
        with pytest.raises(TypeError, match="sequence"):
            TaskTools(task / "evaluator.py", None, hide=task)
    finally:
        shutil.rmtree(task, ignore_errors=True)


def test_scoring_tools_hide_the_whole_example_directory(example: Path) -> None:
    scorer = AgentScorer(_tasks(example), ScoringSettings(), None, {"type": "local"})
    for task in scorer.tasks:
        tools = scorer.tools_factory(task=task, sandbox=None, lineage=[], seed=0, limits=None)
        assert type(tools) is TaskTools
        assert tools.private_paths == (str(example.resolve()),)


@pytest.mark.parametrize("kind", ["local", "bwrap"])
def test_a_scored_agent_cannot_read_another_tasks_evaluator(kind: str, example: Path) -> None:
    from .agents.support import backend_or_skip

    backend_or_skip(kind)
    spy = '''
def propose(task, parent, feedback, tools):
    import json, os
    seen = {}
    for path in PATHS:
        try:
            with open(path) as fh:
                seen[path] = fh.read()[:20]
        except OSError as exc:
            seen[path] = type(exc).__name__
    return parent + "\\n# " + json.dumps(seen)
'''
    tasks = _tasks(example)
    paths = [str(t.evaluator) for t in tasks] + [str(example / "evaluator.py")]
    scorer = AgentScorer(tasks, ScoringSettings(), None, {"type": kind})
    tools = scorer.tools_factory(task=tasks[0], sandbox=None, lineage=[], seed=0, limits=None)
    out = run_agent(f"PATHS = {paths!r}\n" + spy, task=AgentTask(name="bowl", description="d"), parent=PROGRAM,
                    feedback={}, tools=tools, budget=AgentBudget(wall_s=20), sandbox=kind)
    assert out.status == "ok", (out.error, out.log)
    seen = json.loads(out.child.rsplit("\n# ", 1)[1])
    for path in paths:
        assert seen[path] in ("FileNotFoundError", "PermissionError", "NotADirectoryError"), (path, seen[path])


def test_held_out_draws_that_cannot_be_scored_leave_the_stored_verdict_and_say_why(example: Path) -> None:
    """The run is stored before its summary: when the further held-out draws fail (here the
    example lost a held-out task after the run), the summary keeps the stored draw's verdict
    and names the failure instead of failing the run."""
    from qdevolve.errors import ConfigError
    from qdevolve.evolve.executors import EvalJob
    from qdevolve.types import EvalResult, Program

    seed = Program(code=(example / "initial_program.py").read_text(), operator="seed")
    child = Program(code=seed.code + "\n# child\n", operator="self")
    rows = [(seed, EvalResult(score=0.1, metrics={"bowl": 0.1, "heldout/line_fit": 0.2})),
            (child, EvalResult(score=0.3, metrics={"bowl": 0.3, "heldout/line_fit": 0.4}))]

    class Store:
        def iter_evaluated(self, run_id: str):
            return ((i, p, r) for i, (p, r) in enumerate(rows))

    ex = registry.executor.create({"type": "agents", "tasks": {"bowl": {}, "line_fit": {"heldout": True}},
                                   "heldout_draws": 3}, slots=1)
    try:
        ex._last_job = EvalJob(program=seed, evaluator=example / "evaluator.py", limits=None,
                               sandbox={"type": "local"})
        shutil.rmtree(example / "tasks" / "line_fit")
        got = dict(ex.summary_rows(Store(), "r"))
    finally:
        ex.close()
    assert got["held-out"].startswith("best − seed agent: +0.2000 over 1 draws each: no interval"), got
    assert got["held-out draws"].startswith("not scored (ConfigError: run.executor_options.tasks.line_fit: "), got
    with pytest.raises(ConfigError, match="heldout_draws must be between 1 and 1000"):
        registry.executor.create({"type": "agents", "tasks": ["bowl"], "heldout_draws": 0}, slots=1)
