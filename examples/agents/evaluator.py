"""The agents example's first stage: does the agent load and define ``propose``?

The ``agents`` executor runs this through the normal sandbox before it spends any task
evaluations on an agent. An agent passes when its file parses, defines
``propose(task, parent, feedback, tools)`` with four parameters at module level, and imports
(in the candidate process) with ``propose`` callable. The task scores themselves are measured
by the executor, which uses the agent as a mutation operator on the tasks under ``tasks/``.
"""

import ast
import importlib.util


def evaluate(program_path):
    with open(program_path, encoding="utf-8") as f:
        source = f.read()
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(f"the agent does not parse: line {exc.lineno}: {exc.msg}") from None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "propose"]
    if not defs:
        raise ValueError("the agent defines no module-level propose()")
    args = defs[-1].args
    if len(args.posonlyargs) + len(args.args) != 4 and args.vararg is None:
        raise ValueError("propose must take (task, parent, feedback, tools)")
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "propose", None)):
        raise ValueError("propose is not callable after import")
    return {"combined_score": 1.0, "source_lines": float(len(source.splitlines()))}
