"""A well-behaved agent: one ast mutation, one evaluation, the child returned with its score."""
import json


def propose(task, parent, feedback, tools):
    child = tools.mutate(parent)
    result = tools.evaluate(child)
    return child + "\n# evaluated: " + json.dumps({"result": result, "left": tools.remaining(),
                                                     "lineage": tools.lineage(), "task": task})
