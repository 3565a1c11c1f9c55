"""Tasks for the inner loop: prompts plus a verifier (see :mod:`qdevolve.rl.tasks.base`).

``get_task(name, **kwargs)`` builds one by name: ``bandit`` (experiment 1),
``multi_answer`` (experiment 2), ``expr_dsl`` (experiment 3) of the diversity experiments,
``few_answer`` (few correct answers, Zipf-skewed base: the diversity benchmark's task) and
``expr_edit`` (parent -> child edits of expr_dsl expressions: the joined loop's mutation policy) and
``suite_edit`` (the same edits with 2-4 examples: the problem suite's shared policy).
"""

from __future__ import annotations

from typing import Any

from qdevolve.errors import ConfigError
from qdevolve.rl.tasks.bandit import BanditTask, TabularPolicy
from qdevolve.rl.tasks.base import Task, Verdict
from qdevolve.rl.tasks.expr_dsl import ExprDSLTask
from qdevolve.rl.tasks.expr_edit import ExprEditTask
from qdevolve.rl.tasks.few_answer import FewAnswerTask
from qdevolve.rl.tasks.multi_answer import MultiAnswerTask
from qdevolve.rl.tasks.suite import SuiteEditTask

__all__ = ["Task", "Verdict", "BanditTask", "TabularPolicy", "MultiAnswerTask", "ExprDSLTask", "FewAnswerTask",
           "ExprEditTask", "SuiteEditTask", "TASKS", "get_task"]

TASKS: dict[str, type] = {"bandit": BanditTask, "multi_answer": MultiAnswerTask, "expr_dsl": ExprDSLTask,
                         "few_answer": FewAnswerTask, "expr_edit": ExprEditTask,
                         "suite_edit": SuiteEditTask}


def get_task(name: str, **kwargs: Any) -> Task:
    """The task called ``name`` built with ``kwargs``."""
    if name not in TASKS:
        raise ConfigError(f"unknown task {name!r}; available: {', '.join(sorted(TASKS))}")
    try:
        return TASKS[name](**kwargs)
    except TypeError as exc:
        raise ConfigError(f"task {name!r}: {exc}") from exc
