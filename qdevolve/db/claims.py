"""Transactional claims that let several controllers share one run's database.

Two things must never be double counted or lost when controllers on different machines
drive one run (islands, or whole runs) against one PostgreSQL database:

* **Budget.** The run's stored-children counter lives in ``run_state`` (key
  :data:`BUDGET_KEY`, a JSON integer). :func:`take_budget` raises it by ``n`` with one
  conditional ``UPDATE ... WHERE stored + n <= total``: PostgreSQL takes the row lock and
  re-checks the condition on the newest row version (READ COMMITTED re-evaluation), SQLite
  holds the database write lock (``BEGIN IMMEDIATE``), so two controllers can never both
  take the last unit. Called *inside* the transaction that stores the children, a crash
  rolls back the claim with the rows: nothing leaks, nothing is counted twice.
* **Evaluation of stored programs.** A program stored but not yet evaluated (a crashed
  controller's, or a resumed run's) is evaluated by the controller that claims it:
  :func:`claim_program` inserts ``run_state`` key ``claim/<program id>`` (the primary key
  makes the insert the lock; the row's ``updated_at`` is the lease expiry), or takes over a
  claim whose lease expired. :func:`release_program` deletes it in the transaction that
  stores the evaluation.

Every function takes an open SQLAlchemy connection inside a write transaction (the store's
``_begin()``), so the claim commits or rolls back with the rows it guards. Program ids need
no claim: they are random 128-bit hex (``qdevolve.types.new_id``) and unique across machines.
"""

from __future__ import annotations

import json
import time
import warnings

from sqlalchemy import Connection, text

__all__ = ["BUDGET_KEY", "CLAIM_PREFIX", "init_budget", "take_budget", "budget_stored", "reconcile_budget",
           "claim_program", "release_program", "claimed_by"]

BUDGET_KEY = "budget.stored"  # children stored so far (JSON integer)
CLAIM_PREFIX = "claim/"       # + program id; value: JSON {"controller": ...}; updated_at: expiry
_FAR = 1e18                   # the counter row never expires


def init_budget(c: Connection, run_id: str, stored: int) -> None:
    """Create the counter with ``stored`` children unless it exists (start and resume).

    ``INSERT ... ON CONFLICT DO NOTHING`` (``INSERT OR IGNORE`` on SQLite): two controllers
    creating one shared counter at the same moment both succeed, and the first value stays.
    """
    params = {"r": run_id, "k": BUDGET_KEY, "v": json.dumps(int(stored)), "t": _FAR}
    if c.dialect.name == "postgresql":
        c.execute(text("INSERT INTO run_state (run_id, key, value, updated_at) VALUES (:r, :k, :v, :t) "
                       "ON CONFLICT (run_id, key) DO NOTHING"), params)
    elif c.dialect.name == "sqlite":
        c.execute(text("INSERT OR IGNORE INTO run_state (run_id, key, value, updated_at) "
                       "VALUES (:r, :k, :v, :t)"), params)
    else:
        exists = c.execute(text("SELECT 1 FROM run_state WHERE run_id = :r AND key = :k"), params).first()
        if exists is None:
            c.execute(text("INSERT INTO run_state (run_id, key, value, updated_at) VALUES (:r, :k, :v, :t)"),
                      params)


def take_budget(c: Connection, run_id: str, n: int, total: int) -> bool:
    """Count ``n`` more stored children if that stays within ``total``; False when it would not.

    One statement, so it is atomic against every other controller (see the module docstring).
    """
    if n <= 0:
        return True
    res = c.execute(text(
        "UPDATE run_state SET value = CAST(CAST(value AS INTEGER) + :n AS VARCHAR(32)) "
        "WHERE run_id = :r AND key = :k AND CAST(value AS INTEGER) + :n <= :total"),
        {"r": run_id, "k": BUDGET_KEY, "n": int(n), "total": int(total)})
    return res.rowcount == 1


def reconcile_budget(c: Connection, run_id: str) -> tuple[int | None, int]:
    """Set a run's own counter to its stored children (on resume, under the run lease);
    returns ``(counter before, stored children)``. Never for a pool's counter."""
    before = budget_stored(c, run_id)
    stored = int(c.execute(text("SELECT COUNT(*) FROM programs WHERE run_id = :r AND operator <> 'seed'"),
                           {"r": run_id}).scalar() or 0)
    if before is not None and before != stored:
        warnings.warn(f"run {run_id[:12]}: budget counter said {before} stored children, the database "
                      f"holds {stored}; counter reset", stacklevel=3)
        c.execute(text("UPDATE run_state SET value = :v WHERE run_id = :r AND key = :k"),
                  {"r": run_id, "k": BUDGET_KEY, "v": json.dumps(stored)})
    return before, stored


def budget_stored(c: Connection, run_id: str) -> int | None:
    """Children counted so far (``None`` before :func:`init_budget`)."""
    v = c.execute(text("SELECT value FROM run_state WHERE run_id = :r AND key = :k"),
                  {"r": run_id, "k": BUDGET_KEY}).scalar()
    return None if v is None else int(json.loads(v))


def claim_program(c: Connection, run_id: str, program_id: str, controller: str,
                  lease_s: float = 600.0, *, now: float | None = None) -> bool:
    """Claim the evaluation of a stored program for ``controller`` (True when it is ours).

    A claim held by another controller whose lease has not expired is refused; an expired
    one is taken over; our own is renewed.
    """
    now = time.time() if now is None else now
    key, value, until = CLAIM_PREFIX + program_id, json.dumps({"controller": controller}), now + lease_s
    dialect = c.dialect.name
    if dialect == "postgresql":
        ins = ("INSERT INTO run_state (run_id, key, value, updated_at) VALUES (:r, :k, :v, :u) "
               "ON CONFLICT (run_id, key) DO NOTHING")
    else:
        ins = "INSERT OR IGNORE INTO run_state (run_id, key, value, updated_at) VALUES (:r, :k, :v, :u)"
    params = {"r": run_id, "k": key, "v": value, "u": until, "now": now}
    if c.execute(text(ins), params).rowcount == 1:
        return True
    res = c.execute(text("UPDATE run_state SET value = :v, updated_at = :u WHERE run_id = :r "
                         "AND key = :k AND (updated_at < :now OR value = :v)"), params)
    return res.rowcount == 1


def release_program(c: Connection, run_id: str, program_id: str) -> None:
    """Drop the claim (in the transaction that stores the program's evaluation)."""
    c.execute(text("DELETE FROM run_state WHERE run_id = :r AND key = :k"),
              {"r": run_id, "k": CLAIM_PREFIX + program_id})


def claimed_by(c: Connection, run_id: str, program_id: str, *, now: float | None = None) -> str | None:
    """The controller holding a live claim on the program, or ``None``."""
    now = time.time() if now is None else now
    row = c.execute(text("SELECT value, updated_at FROM run_state WHERE run_id = :r AND key = :k"),
                    {"r": run_id, "k": CLAIM_PREFIX + program_id}).first()
    if row is None or row[1] < now:
        return None
    return json.loads(row[0])["controller"]
