"""run_agent: a real agent in a real sandboxed process, budgets enforced by the controller."""

from __future__ import annotations

import time
import uuid

import pytest

from qdevolve import registry
from qdevolve.agents.interface import AgentBudget, AgentOutcome, AgentTask
from qdevolve.agents.runtime import run_agent
from qdevolve.types import Program

from .agents.support import (
    PROGRAM,
    TASK,
    FakeTools,
    agent,
    backend_or_skip,
    comment_json,
    eval_box,  # noqa: F401 - fixture
    processes_with,
    task_dir,  # noqa: F401 - fixture
    task_tools,
)

BACKENDS = ["local", "bwrap"]


def run(name: str, tools, *, sandbox: str = "local", feedback: dict | None = None, **budget) -> AgentOutcome:
    return run_agent(agent(name), task=TASK, parent=PROGRAM, feedback=feedback or {}, tools=tools,
                     budget=AgentBudget(**{"wall_s": 20.0, **budget}), sandbox=sandbox)


@pytest.mark.parametrize("kind", BACKENDS)
def test_good_agent_mutates_and_gets_a_real_score(kind, task_dir, eval_box):  # noqa: F811
    backend_or_skip(kind)
    lineage = [{"id": "p0", "parent": None, "score": 0.2, "status": "ok"}]
    out = run("good", task_tools(task_dir, eval_box, lineage=lineage), sandbox=kind, evaluations=1)
    assert out.status == "ok", (out.error, out.log)
    assert (out.calls, out.evaluations, out.tokens) == (1, 1, 0)
    report = comment_json(out.child)
    child = out.child.split("\n# evaluated: ")[0]
    assert child != PROGRAM and "def solve" in child
    compile(child, "child", "exec")
    # the score the agent got is the sandbox's own score of that child
    direct = eval_box.evaluate(Program(code=child), task_dir / "evaluator.py")
    assert report["result"]["status"] == "ok" and report["result"]["score"] == pytest.approx(direct.score)
    assert report["left"] == {"calls": 3, "evaluations": 0, "tokens": 32000}
    assert report["lineage"] == lineage
    assert report["task"] == {"name": "tiny", "description": TASK.description, "language": "python"}


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize(("calls", "evaluations"), [(2, 1), (0, 0), (3, 2)])
def test_calls_and_evaluations_never_exceed_the_budget(kind, calls, evaluations):
    backend_or_skip(kind)
    tools = FakeTools()
    out = run("greedy", tools, sandbox=kind, calls=calls, evaluations=evaluations, feedback={"tries": 6})
    assert out.status == "ok", (out.error, out.log)
    report = comment_json(out.child)
    assert report["answered"] == {"mutate": calls, "evaluate": evaluations, "generate": 0}
    assert report["refused"] == {"mutate": 6 - calls, "evaluate": 6 - evaluations, "generate": 0}
    assert (out.calls, out.evaluations) == (calls, evaluations)
    assert tools.seen.count("mutate") == calls and tools.seen.count("evaluate") == evaluations
    assert report["left"] == {"calls": 0, "evaluations": 0, "tokens": 32000}


def test_generate_and_mutate_share_the_call_budget():
    tools = FakeTools()
    out = run("greedy", tools, calls=3, feedback={"order": ["generate", "mutate"], "tries": 2})
    report = comment_json(out.child)
    assert report["answered"] == {"generate": 2, "mutate": 1, "evaluate": 0}
    assert out.calls == 3 and len(tools.seen) == 3


def test_token_budget_stops_generate():
    tools = FakeTools(tokens_per_call=100)
    out = run("generator", tools, calls=10, tokens=250)
    assert out.status == "ok", (out.error, out.log)
    # 0, 100, 200 tokens used before each answered call; refused at 300 >= 250
    assert comment_json(out.child)["answered"] == 3
    assert (out.calls, out.tokens) == (3, 300)


def test_offline_generate_is_unavailable_and_free():
    out = run("generator", FakeTools(tokens_per_call=None), calls=2)
    assert comment_json(out.child) == {"answered": 0, "unavailable": True}
    assert (out.calls, out.tokens) == (0, 0)


@pytest.mark.parametrize("kind", BACKENDS)
def test_flood_of_refused_requests_ends_the_run(kind):
    backend_or_skip(kind)
    started = time.monotonic()
    out = run("flood", FakeTools(), sandbox=kind, calls=1, wall_s=30.0)
    assert out.status == "killed" and "past its budget" in out.error
    assert out.calls == 1 and out.child is None
    assert time.monotonic() - started < 10


@pytest.mark.slow
@pytest.mark.parametrize("kind", BACKENDS)
def test_endless_agent_is_killed_at_wall_s_with_its_children(kind):
    backend_or_skip(kind)
    token = f"qdevolve-agent-test-{uuid.uuid4().hex}"
    started = time.monotonic()
    out = run("forever", FakeTools(), sandbox=kind, wall_s=2.0, feedback={"token": token})
    assert out.status == "timeout" and "2 s" in out.error and out.child is None
    assert 2.0 <= time.monotonic() - started < 8
    assert processes_with(token) == []


@pytest.mark.parametrize("kind", BACKENDS)
def test_memory_hog_ends_memory(kind):
    backend_or_skip(kind)
    out = run("hog", FakeTools(), sandbox=kind, memory_mb=256)
    assert out.status == "memory", (out.error, out.log)
    assert out.child is None


@pytest.mark.parametrize("kind", BACKENDS)
def test_memory_cap_is_memory_mb(kind):
    backend_or_skip(kind)
    out = run("hog_report", FakeTools(), sandbox=kind, memory_mb=256)
    assert out.status == "ok", (out.error, out.log)
    assert 64 <= int(out.child) < 256  # refused below the cap; the interpreter holds the rest


def test_agent_that_does_not_compile_is_an_error():
    out = run_agent("def propose(:\n", task=TASK, parent=PROGRAM, feedback={}, tools=FakeTools(),
                    budget=AgentBudget(wall_s=20), sandbox="local")
    assert out.status == "error" and "SyntaxError" in out.error and "'tiny'" in out.error
    assert "SyntaxError" in out.log


def test_docker_is_refused_with_one_clear_line():
    with pytest.raises(ValueError, match="local or bwrap"):
        run("good", FakeTools(), sandbox="docker")


def test_auto_resolves_to_a_process_backend():
    out = run("greedy", FakeTools(), sandbox="auto", calls=1, feedback={"tries": 1})
    assert out.status == "ok"


def test_agent_sees_plain_task_and_feedback_data(task_dir):  # noqa: F811
    out = run_agent(agent("good"), task=AgentTask("t", "d", "python"), parent=PROGRAM,
                    feedback={"score": 0.5}, tools=FakeTools(), budget=AgentBudget(evaluations=1, wall_s=20),
                    sandbox="local")
    assert out.status == "ok"
    assert comment_json(out.child)["task"] == {"name": "t", "description": "d", "language": "python"}


def test_bad_budget_or_feedback_is_an_error_of_the_caller():
    with pytest.raises(ValueError, match="wall_s"):
        run("good", FakeTools(), wall_s=0)
    with pytest.raises(ValueError, match="plain JSON"):
        run_agent("", task=TASK, parent="", feedback={"x": object()}, tools=FakeTools(),
                  budget=AgentBudget(), sandbox="local")


def test_tasktools_mutate_uses_the_registry_ast_operator(task_dir, eval_box):  # noqa: F811
    tools = task_tools(task_dir, eval_box, seed=3)
    a = tools.mutate(PROGRAM)
    assert a != PROGRAM and "EVOLVE-BLOCK-START" in a
    assert task_tools(task_dir, eval_box, seed=3).mutate(PROGRAM) == a  # seeded
    assert str(task_dir) in tools.private_paths
    with pytest.raises(Exception, match="offline"):
        tools.generate("x")
    assert tools.lineage() == [] and tools.lineage() is not tools.lineage()
    assert registry.mutation.create({"type": "ast"}).name == "ast"
