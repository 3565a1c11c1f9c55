"""Calls tools.generate until refused; returns the number of answered calls."""
import json


def propose(task, parent, feedback, tools):
    answered = 0
    try:
        while True:
            tools.generate("improve this:\n" + parent)
            answered += 1
    except tools.BudgetExhausted:
        pass
    except tools.ToolUnavailable:
        return parent + "\n# " + json.dumps({"answered": answered, "unavailable": True})
    return parent + "\n# " + json.dumps({"answered": answered, "left": tools.remaining()})
