"""The seed agent of the agents example: a mutation operator that can rewrite itself.

An agent defines ``propose(task, parent, feedback, tools) -> str``: given a task (a dict with
``name``, ``description`` and ``language``), the parent program's code and feedback about it
(plain JSON data), it returns the whole code of one child. ``tools`` is its only way out of
its sandbox: ``tools.mutate(code)`` applies the run's offline operator once,
``tools.evaluate(code)`` scores a candidate with the task's own evaluator, ``tools.generate``
asks a model (when the run has one), ``tools.lineage()`` lists earlier attempts and
``tools.remaining()`` the budget left. Past the budget a tool raises ``BudgetExhausted``.

The knobs below are what self-modification can find: how many candidates to try, how many
edits to chain into one candidate, and whether to spend evaluations keeping the best of them.
The seed agent tries one single-edit candidate and never evaluates: a weak start on purpose.
"""

# EVOLVE-BLOCK-START
TRIES = 1        # candidates made per call
CHAIN = 1        # edits chained into one candidate
USE_EVALUATE = 0  # > 0: evaluate the candidates and return the best one


def _candidate(parent, tools):
    code = parent
    for _ in range(CHAIN):
        code = tools.mutate(code)
    return code


def propose(task, parent, feedback, tools):
    exhausted = getattr(tools, "BudgetExhausted", RuntimeError)
    best_code, best_score = None, None
    if USE_EVALUATE > 0:
        best_score = feedback.get("score")
    for _ in range(TRIES):
        try:
            code = _candidate(parent, tools)
        except exhausted:
            break
        except Exception:  # a tool failed (e.g. no edit site): try again
            continue
        if best_code is None:
            best_code = code
        if USE_EVALUATE > 0:
            try:
                result = tools.evaluate(code)
            except exhausted:
                break
            except Exception:
                continue
            score = result.get("score")
            if result.get("status") == "ok" and score is not None and (best_score is None or score > best_score):
                best_code, best_score = code, score
    return best_code if best_code is not None else parent
# EVOLVE-BLOCK-END
