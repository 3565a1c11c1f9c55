"""The agents example's first stage: does the agent load and define ``propose``?

The ``agents`` executor runs this through the normal sandbox before it spends any task
evaluations on an agent. An agent passes when it imports (in the sandbox's candidate
process) and has a callable ``propose``. The agent-side module ``qdevolve_agent`` exists only
in the agent's own sandbox, so an agent that imports it at the top is checked by its text
instead: a module-level ``def propose(`` line. The task scores themselves are measured by the
executor, which uses the agent as a mutation operator on the tasks under ``tasks/``.
"""

import importlib.util
import re


def evaluate(program_path):
    with open(program_path, encoding="utf-8") as f:
        source = f.read()
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        if "qdevolve_agent" not in str(exc):
            raise
        if not re.search(r"^def propose\(", source, re.MULTILINE):
            raise ValueError("the agent defines no module-level propose(task, parent, feedback, tools)") from None
        return {"combined_score": 1.0}
    if not callable(getattr(module, "propose", None)):
        raise ValueError("the agent defines no callable propose(task, parent, feedback, tools)")
    return {"combined_score": 1.0}
