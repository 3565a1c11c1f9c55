"""The agents example's first stage: does the agent load and define ``propose``?

The ``agents`` executor runs this through the normal sandbox before it spends any task
evaluations on an agent. An agent passes when it imports (in the sandbox's candidate
process) and has a callable ``propose``; the task scores themselves are measured by the
executor, which uses the agent as a mutation operator on the tasks under ``tasks/``.
"""

import importlib.util


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "propose", None)):
        raise ValueError("the agent defines no callable propose(task, parent, feedback, tools)")
    return {"combined_score": 1.0}
