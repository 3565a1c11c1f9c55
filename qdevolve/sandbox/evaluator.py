"""Evaluator protocol helpers on the controller side: a static check and result assembly.

The evaluator is trusted user code, but it runs only inside the sandbox (the runner imports
it there); the controller merely parses it (:func:`check_evaluator`) and turns what the
sandbox produced into an :class:`~qdevolve.types.EvalResult` (:func:`build_result`).

Protocol (compatible with OpenEvolve): ``evaluate(program_path)`` returns a dict or an
object with ``.metrics``/``.artifacts``. ``combined_score`` becomes ``EvalResult.score``;
without it the score is the mean of the numeric metrics. ``tests`` (floats in [0, 1]),
``features`` (numbers) and ``artifacts`` (strings) are optional; an ``error`` string makes the
status ``error``. NaN, infinities and non-numeric metrics make the status ``invalid``.
Optional cascade: ``evaluate_stage1/2/3`` with thresholds (see ``docs/sandbox.md``).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from qdevolve.errors import EvaluationSetupError
from qdevolve.sandbox.runner import MAX_RECORD_BYTES, ProtocolError, check_record
from qdevolve.sandbox.status import Outcome, classify
from qdevolve.types import EvalResult

__all__ = ["check_evaluator", "read_record", "build_result"]


def check_evaluator(path: str | Path) -> None:
    """Statically check an evaluator file; nothing is executed.

    Raises:
        EvaluationSetupError: the file is missing or unreadable, has a syntax error, or
            defines no module-level ``evaluate``.
    """
    p = Path(path)
    if not p.is_file():
        raise EvaluationSetupError(
            f"evaluator {p} does not exist; give the path of a Python file defining evaluate(program_path)"
        )
    try:
        source = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EvaluationSetupError(f"evaluator {p} cannot be read: {exc}") from exc
    try:
        tree = ast.parse(source, filename=str(p))
    except SyntaxError as exc:
        raise EvaluationSetupError(
            f"evaluator {p} has a syntax error at line {exc.lineno}: {exc.msg}"
        ) from exc
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.AnnAssign,)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    if "evaluate" not in names:
        raise EvaluationSetupError(
            f"evaluator {p} defines no evaluate function; add `def evaluate(program_path): "
            f"return {{'combined_score': ...}}`"
        )


def read_record(path: Path, nonce: str) -> tuple[dict | None, str | None]:
    """Read and validate the runner's record: ``(record, None)``, ``(None, why)`` or ``(None, None)``.

    ``(None, None)`` means no record at all. Symlinks and non-regular files are refused.
    """
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"result record cannot be opened ({exc.strerror}): forged"
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None, "result record is not a regular file: forged"
        data = fh.read(MAX_RECORD_BYTES + 1)
    if not data:
        return None, None
    if len(data) > MAX_RECORD_BYTES:
        return None, "result record exceeds 4 MiB"
    try:
        record = json.loads(data.decode("utf-8", errors="replace"))
    except ValueError:
        return None, "result record is not one JSON object (forged or corrupted)"
    try:
        return check_record(record, nonce), None
    except ProtocolError as exc:
        return None, str(exc)


def build_result(outcome: Outcome, *, runtime_s: float, stdout: str, stderr: str,
                 truncated: list[str]) -> EvalResult:
    """Assemble the :class:`EvalResult` of one run (status from :func:`classify`)."""
    status, error = classify(outcome)
    rec = outcome.record if status != "invalid" else None
    artifacts: dict[str, str] = {}
    if rec:
        artifacts.update(rec.get("artifacts") or {})
    if stdout:
        artifacts["stdout"] = stdout
    if stderr:
        artifacts["stderr"] = stderr
    if truncated:
        artifacts["truncated"] = ",".join(truncated)
    score = rec.get("score") if rec and status == "ok" else None
    return EvalResult(
        status=status,  # type: ignore[arg-type]
        score=None if score is None else float(score),
        metrics={k: float(v) for k, v in (rec.get("metrics") or {}).items()} if rec else {},
        tests=None if not rec or rec.get("tests") is None else [float(v) for v in rec["tests"]],
        features={k: float(v) for k, v in (rec.get("features") or {}).items()} if rec else {},
        artifacts=artifacts,
        error=error,
        runtime_s=runtime_s,
        peak_memory_mb=(rec or {}).get("peak_memory_mb"),
    )
