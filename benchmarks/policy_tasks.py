"""The expression tasks of ``bench_policy_samples.py`` and the in-process sandbox that scores them.

A task is a directory in the form of ``examples/expr_evolution`` (``config.yaml``,
``evaluator.py``, ``initial_program.py``). ``expr_evolution`` is that example as it ships
(f(x) = 3x + 1, seed ``x+1``). ``suite:tNN`` is a target of the problem suite
(``qdevolve/rl/tasks/suite_targets.json``) written out as such a directory: the target's
reference function given by five examples on the inputs 0, 1, 2, 3, 5 (the prompt format
the cached ``expr_edit`` base was pre-trained on), the suite's seed parent ``x``, and the
example's config with the prompt template naming the new examples. The suite's own two
examples per target would need the ``suite_edit`` base, which is not cached here; five
examples give the target more than one step of partial credit.

:class:`ExprTaskSandbox` (``policy_expr``) scores a child with its task's own
``evaluator.py`` rules, in process: the ``EXPR`` string is read from the child's code with a
regular expression and walked by the evaluator's AST whitelist (never executed); score,
tests, features and ``artifacts["outputs"]`` are exactly what ``evaluate()`` returns for it.
It replaces the subprocess sandbox only to fit the budget.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

from qdevolve import registry
from qdevolve.types import EvalResult, Program

__all__ = ["ExprTaskSandbox", "INPUTS", "prepare_task"]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "expr_evolution"
INPUTS = (0, 1, 2, 3, 5)  # the example inputs of the expr_edit prompt format
_EXPR = re.compile(r'EXPR = "([^"\n]*)"')
_EVALUATORS: dict[str, ModuleType] = {}


def task_evaluator(task_dir: str | Path) -> ModuleType:
    """The task's ``evaluator.py`` as a module (trusted: written here or shipped), loaded once."""
    key = str(Path(task_dir).resolve())
    if key not in _EVALUATORS:
        spec = importlib.util.spec_from_file_location(f"policy_task_{len(_EVALUATORS)}", Path(key) / "evaluator.py")
        if spec is None or spec.loader is None:
            raise FileNotFoundError(f"{key}/evaluator.py: no evaluator to load")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _EVALUATORS[key] = module
    return _EVALUATORS[key]


def _replace_once(text: str, pattern: str, new: str, where: Path) -> str:
    out, n = re.subn(pattern, lambda _m: new, text, count=1, flags=re.M)
    if n != 1:
        raise ValueError(f"{where}: expected one line matching {pattern!r} to rewrite for the task")
    return out


def prepare_task(name: str, out: Path) -> Path:
    """The directory of task ``name`` (``expr_evolution`` or ``suite:tNN``), written under ``out``."""
    if name == "expr_evolution":
        return EXAMPLE
    if not name.startswith("suite:"):
        raise ValueError(f"task {name!r}: expected 'expr_evolution' or 'suite:tNN' (a suite target)")
    from qdevolve.rl.tasks.suite import SEED_PARENT, load_targets

    targets = {t.name: t for t in load_targets()}
    target = targets.get(name.split(":", 1)[1])
    if target is None:
        raise ValueError(f"task {name!r}: no such suite target; known: {', '.join(sorted(targets))}")
    ev = task_evaluator(EXAMPLE)
    tree = ev.compile_expression(target.reference)
    visible = [(x, ev._value(tree, x)) for x in INPUTS]
    hidden = [(x, ev._value(tree, x)) for x in (-3, 4, 7, 10, 25)]
    task = out / "tasks" / name.replace(":", "_")
    task.mkdir(parents=True, exist_ok=True)
    head = (f"# Written by benchmarks/bench_policy_samples.py: suite target {target.name}, reference "
            f"{target.reference}, five examples on x = {', '.join(map(str, INPUTS))}.\n")
    src = (EXAMPLE / "evaluator.py").read_text()
    src = _replace_once(src, r"^VISIBLE = \[.*\]$", f"VISIBLE = {visible!r}", EXAMPLE / "evaluator.py")
    src = _replace_once(src, r"^HIDDEN = \[.*\]$", f"HIDDEN = {hidden!r}", EXAMPLE / "evaluator.py")
    (task / "evaluator.py").write_text(head + src)
    prompt = ",".join(f"{x}>{y}" for x, y in visible)
    cfg = (EXAMPLE / "config.yaml").read_text()
    cfg, n = re.subn(r'(prompt_template: ")[^|"]*(\|)', lambda m: m.group(1) + prompt + m.group(2), cfg, count=1)
    if n != 1:
        raise ValueError(f"{EXAMPLE / 'config.yaml'}: no prompt_template of the form \"EXAMPLES|{{parent}}|...\"")
    (task / "config.yaml").write_text(head + cfg)
    seed = (EXAMPLE / "initial_program.py").read_text()
    (task / "initial_program.py").write_text(
        _replace_once(seed, r'^EXPR = ".*"$', f'EXPR = "{SEED_PARENT}"', EXAMPLE / "initial_program.py"))
    for stale in ("README.md",):
        (task / stale).unlink(missing_ok=True)
    shutil.rmtree(task / "__pycache__", ignore_errors=True)
    return task


@registry.sandbox("policy_expr")
class ExprTaskSandbox:
    """Scores ``EXPR`` by the rules of the task's ``evaluator.py`` without running the program.

    Args:
        task: The task directory (its ``evaluator.py`` holds the examples and the whitelist).
    """

    def __init__(self, task: str, **_: Any) -> None:
        self.ev = task_evaluator(task)

    def evaluate(self, program: Program, evaluator: Any = None, limits: Any = None, *,
                 cascade_thresholds: Any = None) -> EvalResult:
        ev = self.ev
        m = _EXPR.search(program.code)
        if m is None:  # the real sandbox would fail to import or find no EXPR
            return EvalResult(status="error", error='no EXPR = "..." line in the program')
        text = m.group(1).replace(" ", "")
        try:
            tree = ev.compile_expression(text)
            tests = [1.0 if ev._value(tree, x) == y else 0.0 for x, y in ev.VISIBLE]
            outputs = ",".join(str(ev._value(tree, x)) for x in ev.PROBES)
        except ev.BadExpression as exc:  # the evaluator scores a non-expression 0 (status ok)
            return EvalResult(score=0.0, tests=[0.0] * len(ev.VISIBLE),
                              features={"length": float(min(len(text), ev.MAX_LEN)), "multiplications": 0.0},
                              artifacts={"error": str(exc), "outputs": "invalid"})
        return EvalResult(score=sum(tests) / len(tests), tests=tests,
                          features={"length": float(len(text)), "multiplications": float(text.count("*"))},
                          artifacts={"expression": text, "outputs": outputs})

    def close(self) -> None:
        pass
