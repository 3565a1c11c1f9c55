"""Hostile agents, each on ``local`` and on ``bwrap``: what they try cannot change the outcome,
reach the task's secrets or the repository, write outside their own directory, or outlive
the run."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from qdevolve.agents._launch import repository_root
from qdevolve.agents.interface import AgentBudget, AgentOutcome
from qdevolve.agents.runtime import run_agent

from .agents.support import (
    PROGRAM,
    SECRET,
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


@pytest.fixture(params=["local", "bwrap"])
def kind(request):
    return backend_or_skip(request.param)


def run(name: str, kind: str, tools=None, *, feedback: dict | None = None, **budget) -> AgentOutcome:
    return run_agent(agent(name), task=TASK, parent=PROGRAM, feedback=feedback or {},
                     tools=tools or FakeTools(), budget=AgentBudget(**{"wall_s": 20.0, **budget}), sandbox=kind)


def test_cannot_read_the_evaluator_its_data_the_repository_or_the_database(kind, task_dir, eval_box, tmp_path,  # noqa: F811
                                                                           monkeypatch):
    repo = Path(repository_root())
    db_dir = tmp_path / "archives"
    db_dir.mkdir()
    (db_dir / "run.sqlite").write_text(SECRET)
    monkeypatch.chdir(tmp_path)
    paths = [str(task_dir / "evaluator.py"), str(task_dir / "data.json"), str(task_dir / "run.sqlite"),
             str(task_dir), str(repo / "qdevolve" / "__init__.py"), str(repo / "pyproject.toml"), str(repo),
             str(db_dir / "run.sqlite"), str(db_dir)]
    out = run("spy", kind, task_tools(task_dir, eval_box), feedback={"paths": paths})
    assert out.status == "ok", (out.error, out.log)
    seen = comment_json(out.child)
    assert set(seen) == set(paths)
    for path, what in seen.items():
        assert SECRET not in what, path
        assert not what.startswith("read:") or what == "read: ", (path, what)
        assert "evaluator.py" not in what and "qdevolve" not in what.split(":", 1)[1].split(), (path, what)
    # the files are there, for the controller: it is the agent that cannot see them
    assert SECRET in (task_dir / "data.json").read_text()


def test_cannot_write_outside_its_own_directory(kind, task_dir, tmp_path):  # noqa: F811
    token = uuid.uuid4().hex
    targets = [task_dir / f"x-{token}.py", Path(repository_root()) / f"x-{token}.txt", tmp_path / f"x-{token}",
               Path("/tmp") / f"x-{token}", Path("/var/tmp") / f"x-{token}", Path("/usr") / f"x-{token}"]
    out = run("vandal", kind, feedback={"paths": [str(p) for p in targets]})
    assert out.status == "ok", (out.error, out.log)
    done = comment_json(out.child)
    assert [v for k, v in done.items() if k.endswith("mine.txt")] == ["written"]  # its own cwd works
    for path in targets:
        assert not path.exists(), f"the agent wrote {path}"


@pytest.mark.parametrize("mode", ["stdio"])
def test_frames_on_stdout_or_stderr_are_only_log(kind, mode):
    out = run("forger", kind, feedback={"mode": mode})
    assert out.status == "ok" and out.child == "REAL"
    assert (out.calls, out.evaluations) == (0, 0)
    assert "FORGED" in out.log  # the fake frames went to the log, nowhere else


@pytest.mark.parametrize("mode", ["reply", "result_extra", "garbage", "huge_header"])
def test_forged_messages_on_the_pipe_end_the_run_invalid(kind, mode):
    out = run("forger", kind, feedback={"mode": mode})
    assert out.status == "invalid", (mode, out.error, out.log)
    assert out.child is None and out.error and "\n" not in out.error
    assert "agent" in out.error and "'tiny'" in out.error


def test_cannot_forge_a_reply_on_the_reply_pipe(kind):
    tools = FakeTools()
    out = run("forger", kind, tools, feedback={"mode": "reply_pipe"}, evaluations=0)
    assert out.status == "ok", (out.error, out.log)
    report = comment_json(out.child)
    assert report["wrote"] != "yes" and report["result"] == "refused"
    assert out.evaluations == 0 and tools.seen == []


def test_a_process_that_outlives_the_agent_is_killed(kind):
    token = f"qdevolve-agent-test-{uuid.uuid4().hex}"
    out = run("orphan", kind, feedback={"token": token})
    assert out.status == "ok", (out.error, out.log)
    assert out.child.endswith("# running")
    assert processes_with(token) == []


@pytest.mark.parametrize(("mode", "size", "status", "says"), [
    ("nonstring", 0, "invalid", "int, not a string"),
    ("no_propose", 0, "invalid", "NoneType, not a string"),
    ("huge", 4500, "invalid", "over message_bytes=4000"),  # the frame fits, the child does not
    ("huge", 100_000, "invalid", "exceeds the bound"),  # refused from its header
    ("crash", 0, "error", "ValueError: the agent gave up"),
    ("exit", 0, "error", "SystemExit: 3"),
    ("segfault", 0, "killed", "SIGSEGV"),
])
def test_bad_children_and_crashes_get_their_status(kind, mode, size, status, says):
    out = run("odd", kind, feedback={"mode": mode, "size": size}, message_bytes=4000)
    assert out.status == status, (mode, out.error, out.log)
    assert out.child is None and says in out.error and "\n" not in out.error


def test_a_child_just_under_message_bytes_is_accepted(kind):
    out = run("odd", kind, feedback={"mode": "huge", "size": 3000}, message_bytes=4000)
    assert out.status == "ok" and out.child == "x" * 3000


def test_no_stage_directory_or_uid_process_is_left(kind, monkeypatch):
    from qdevolve.agents import _launch
    from qdevolve.sandbox._proc import uid_processes

    stages = []
    real_stage = _launch._stage

    def recording_stage(*args, **kwargs):
        stages.append(real_stage(*args, **kwargs))
        return stages[-1]

    monkeypatch.setattr(_launch, "_stage", recording_stage)
    source = "import os\ndef propose(task, parent, feedback, tools):\n    return str(os.getuid())\n"
    out = run_agent(source, task=TASK, parent="", feedback={}, tools=FakeTools(), budget=AgentBudget(),
                    sandbox=kind)
    assert out.status == "ok" and len(stages) == 1
    assert not stages[0].exists()
    uid = int(out.child)
    if os.geteuid() == 0:
        assert uid != 0 and uid != os.getuid()  # the candidate principal, not the controller
        assert uid_processes([uid]) == {}


def test_no_network_and_no_qdevolve_inside(kind):
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    try:
        out = run("caller", kind, feedback={"port": server.getsockname()[1]})
        assert out.status == "ok", (out.error, out.log)
        seen = comment_json(out.child)
        assert seen["connect"] != "connected" and seen["import"] == "ModuleNotFoundError"
        with pytest.raises(OSError):  # nothing reached the host's loopback
            server.accept()
    finally:
        server.close()
