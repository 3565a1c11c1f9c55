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

__all__ = ["check_evaluator", "parse_record", "cap_artifacts", "build_result"]


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


def parse_record(text: str, nonce: str, *, clean_exit: bool) -> tuple[dict | None, str | None]:
    """Decode and validate the runner's record: ``(record, None)``, ``(None, why)`` or ``(None, None)``.

    ``(None, None)`` means no record. A record counts only from a clean exit (status 0 and
    no wall-clock kill): whatever a run that ended otherwise wrote is ignored.
    """
    if not clean_exit or not text.strip():
        return None, None
    if len(text.encode("utf-8", "surrogatepass")) > MAX_RECORD_BYTES:
        return None, "result record exceeds 4 MiB"
    try:
        record = json.loads(text)
    except ValueError:
        return None, "result record is not one JSON object (corrupted)"
    try:
        return check_record(record, nonce), None
    except ProtocolError as exc:
        return None, str(exc)


def cap_artifacts(artifacts: dict[str, str], limit: int) -> dict[str, str]:
    """At most ``limit`` UTF-8 bytes of artifacts in total; cut values keep their end (the
    tail of a log says most) and ``artifacts["truncated"]`` names them."""
    truncated = [k for k in (artifacts.get("truncated") or "").split(",") if k]
    out: dict[str, str] = {}
    left = limit
    # short values first, so one flood does not crowd out every other artifact
    for key in sorted(artifacts, key=lambda k: len(artifacts[k])):
        if key == "truncated":
            continue
        value = artifacts[key]
        size = len(value.encode("utf-8", "replace"))
        if size > left:
            keep = max(0, left)
            value = value.encode("utf-8", "replace")[size - keep:].decode("utf-8", "ignore") if keep else ""
            truncated.append(key)
        left -= len(value.encode("utf-8", "replace"))
        out[key] = value
    if truncated:
        out["truncated"] = ",".join(dict.fromkeys(truncated))
    return {k: out[k] for k in [*artifacts, "truncated"] if k in out}


def build_result(outcome: Outcome, *, runtime_s: float, stdout: str, stderr: str,
                 truncated: list[str], artifacts_bytes: int = 256 * 1024) -> EvalResult:
    """Assemble the :class:`EvalResult` of one run (status from :func:`classify`).

    ``stdout`` is what the run wrote besides its record (the record's own ``stdout`` field
    wins when there is a record).
    """
    status, error = classify(outcome)
    rec = outcome.record if status != "invalid" else None
    artifacts: dict[str, str] = {}
    cut = list(truncated)
    if rec:
        artifacts.update(rec.get("artifacts") or {})
        stdout = rec.get("stdout") or ""
        if rec.get("stdout_truncated"):
            cut.append("stdout")
    if stdout:
        artifacts["stdout"] = stdout
    if stderr:
        artifacts["stderr"] = stderr
    if cut:
        artifacts["truncated"] = ",".join(dict.fromkeys(cut))
    artifacts = cap_artifacts(artifacts, artifacts_bytes)
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
