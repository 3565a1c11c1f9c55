"""Helpers of the agent runtime tests: a small task on disk, the tools over it, process checks."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from qdevolve import registry
from qdevolve.agents.interface import AgentTask, ToolUnavailable

HERE = Path(__file__).resolve().parent
SECRET = "SECRET-TARGET-7f3a"

PROGRAM = """\
# EVOLVE-BLOCK-START
def solve():
    return 3.0 * 2.0
# EVOLVE-BLOCK-END
"""

EVALUATOR = """\
import importlib.util
import json
import os


def evaluate(program_path):
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data.json")) as fh:
        data = json.load(fh)
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    value = float(module.solve())
    return {"combined_score": 1.0 / (1.0 + abs(value - data["target"])), "value": value}
"""

TASK = AgentTask(name="tiny", description="make solve() return the hidden target")


def agent(name: str) -> str:
    """The source of the test agent ``name``."""
    return (HERE / f"{name}.py").read_text()


def backend_or_skip(kind: str) -> str:
    if kind == "bwrap":
        from qdevolve.sandbox.bwrap import bwrap_available

        if not bwrap_available():
            pytest.skip("BWRAP TESTS SKIPPED: bubblewrap is missing or cannot create namespaces here")
    return kind


def make_task_dir() -> Path:
    """A task directory (evaluator.py, data.json with the secret, initial_program.py) where
    no sandbox hides it by default: under /var/lib when writable, else the temp dir."""
    base = "/var/lib" if os.access("/var/lib", os.W_OK) else None
    root = Path(tempfile.mkdtemp(prefix="qdevolve-agent-task-", dir=base))
    os.chmod(root, 0o755)
    (root / "evaluator.py").write_text(EVALUATOR)
    (root / "data.json").write_text(json.dumps({"target": 7.0, "secret": SECRET}))
    (root / "initial_program.py").write_text(PROGRAM)
    (root / "run.sqlite").write_text(SECRET)  # a stand-in for a run database next to it
    return root


@pytest.fixture(scope="module")
def task_dir():
    root = make_task_dir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def eval_box():
    box = registry.sandbox.create({"type": "local"})
    yield box
    box.close()


def task_tools(task_dir: Path, box, *, backend=None, lineage=None, seed: int = 0):
    from qdevolve.agents.tools import TaskTools

    operator = registry.mutation.create({"type": "ast"})
    return TaskTools(task_dir / "evaluator.py", box, operator, backend, lineage or [], seed)


class FakeTools:
    """Controller-side tools that never run code: a fixed reply per tool, calls recorded."""

    def __init__(self, tokens_per_call: int | None = 100) -> None:
        self.tokens_per_call = tokens_per_call
        self.seen: list[str] = []

    def generate(self, prompt):
        self.seen.append("generate")
        if self.tokens_per_call is None:
            raise ToolUnavailable("offline")
        return "completion", self.tokens_per_call

    def mutate(self, code):
        self.seen.append("mutate")
        return code + "\n# mutated"

    def evaluate(self, code):
        self.seen.append("evaluate")
        return {"status": "ok", "score": 0.5, "metrics": {}, "feedback": ""}

    def lineage(self):
        return [{"id": "a", "parent": None, "score": 0.1, "status": "ok"}]


def processes_with(token: str) -> list[int]:
    """Pids whose command line holds ``token``."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if token.encode() in fh.read():
                    out.append(int(pid))
        except OSError:
            continue
    return out


def comment_json(child: str) -> dict:
    """The JSON the agent appended to its child as ``# {...}`` on the last line."""
    line = child.rstrip("\n").splitlines()[-1]
    return json.loads(line.split("# ", 1)[1].removeprefix("evaluated: "))
