"""Keeps asking past its budget forever (the controller must end the run)."""


def propose(task, parent, feedback, tools):
    while True:
        try:
            tools.mutate(parent)
        except tools.BudgetExhausted:
            pass
