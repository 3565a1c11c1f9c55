"""Calls every tool past its budget; returns how many calls of each kind were answered."""
import json

from qdevolve_agent import BudgetExhausted


def propose(task, parent, feedback, tools):
    answered = {"mutate": 0, "evaluate": 0, "generate": 0}
    refused = {"mutate": 0, "evaluate": 0, "generate": 0}
    for name in feedback.get("order", ["mutate", "evaluate"]):
        for _ in range(feedback.get("tries", 10)):
            try:
                getattr(tools, name)(parent if name != "generate" else "write better code")
                answered[name] += 1
            except BudgetExhausted:
                refused[name] += 1
            except tools.ToolError:
                answered[name] += 1
    return parent + "\n# " + json.dumps({"answered": answered, "refused": refused, "left": tools.remaining()})
