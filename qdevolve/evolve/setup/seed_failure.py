"""What a user sees when the seed does not evaluate: the error, its traceback's last frames
and the exact ``qdevolve sandbox exec`` command that reproduces it.

The traceback comes from the sandbox (the evaluator's or the candidate's own), so it is
bounded (the last :data:`MAX_FRAMES` frames, at most :data:`MAX_CHARS` characters) and
escaped against terminal control characters before it is printed.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any

from qdevolve.errors import EvaluationSetupError
from qdevolve.textsafe import terminal_safe, terminal_safe_line
from qdevolve.types import EvalResult

__all__ = ["MAX_FRAMES", "MAX_CHARS", "SeedFailed", "last_frames", "reproduce_command", "seed_failure"]

MAX_FRAMES = 4
MAX_CHARS = 3000
_DEFAULTS = {"wall_s": 30.0, "cpu_s": 30.0, "memory_mb": 1024}


class SeedFailed(EvaluationSetupError):
    """A seed did not evaluate ``ok``. ``detail`` holds the traceback tail and the command
    that reproduces the failure; the CLI prints it under the one-line message."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


_RUNNER_FILES = frozenset({"runner.py", "_standin.py", "_wire.py", "candidate.py", "zygote.py", "_procctl.py",
                           "_codeorigin.py", "_importguard.py"})
_FILE_RE = re.compile(r'^\s*File "([^"]+)"')


def _is_runner_frame(line: str) -> bool:
    """A frame of qdevolve's runner or of the import machinery (noise to the user)."""
    m = _FILE_RE.match(line)
    if m is None:
        return False
    if m.group(1).startswith("<frozen "):
        return True
    path = PurePosixPath(m.group(1))
    return path.parent.name == "runner" and path.name in _RUNNER_FILES


def last_frames(traceback_text: str, frames: int = MAX_FRAMES, limit: int = MAX_CHARS, *,
                evaluator: Path | None = None) -> str:
    """The last ``frames`` frames of a Python traceback and its exception line(s), at most
    ``limit`` characters, escaped for a terminal (newlines kept).

    Frames of qdevolve's own runner are left out, and the sandbox's copy of the evaluator is
    shown under ``evaluator`` (the user's path)."""
    lines = traceback_text.rstrip("\n").splitlines()
    kept, skipping = [], False
    for ln in lines:
        if _FILE_RE.match(ln):
            skipping = _is_runner_frame(ln)
        elif not ln.startswith(" "):
            skipping = False  # "Traceback (most recent call last):", the exception lines
        if not skipping:
            if evaluator is not None:
                m = _FILE_RE.match(ln)
                if m and PurePosixPath(m.group(1)).name == evaluator.name:
                    ln = ln.replace(m.group(1), str(evaluator), 1)
            kept.append(ln)
    starts = [i for i, ln in enumerate(kept) if _FILE_RE.match(ln)]
    if len(starts) > frames:
        kept = [f"  ... ({len(starts) - frames} earlier frame(s) left out)"] + kept[starts[-frames]:]
    text = "\n".join(kept)
    if len(text) > limit:
        text = "..." + text[-(limit - 3):]
    return terminal_safe(text)


def reproduce_command(seed_path: Path, evaluator_path: Path | None, sandbox_type: str, limits: Any,
                      cascade: tuple[float, ...] | None, image: str | None = None) -> str:
    """The ``qdevolve sandbox exec`` command line that evaluates the seed as the run did."""
    args = ["qdevolve", "sandbox", "exec", str(seed_path)]
    if evaluator_path is not None:
        args += ["--evaluator", str(evaluator_path)]
    args += ["--backend", sandbox_type]
    if image:
        args += ["--image", image]
    for field, flag in (("wall_s", "--wall-s"), ("cpu_s", "--cpu-s"), ("memory_mb", "--memory-mb")):
        value = getattr(limits, field, None)
        if value is not None and value != _DEFAULTS[field]:
            args += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if cascade:
        args += ["--cascade", ",".join(f"{t:g}" for t in cascade)]
    return " ".join(shlex.quote(a) for a in args)


def seed_failure(seed_path: Path, evaluator_path: Path | None, result: EvalResult, *, sandbox_type: str,
                 limits: Any, cascade: tuple[float, ...] | None, image: str | None = None) -> SeedFailed:
    """The error for a seed whose result is not ``ok`` (or has no score)."""
    lines = (result.error or "").strip().splitlines()
    if result.status == "ok":
        summary = "no score: evaluate() returned no combined_score and no numeric metric"
    else:
        summary = lines[-1] if lines else "no detail"
    where = evaluator_path if evaluator_path is not None else seed_path
    message = (f"{where}: evaluating the seed {seed_path.name} gave status '{result.status}' "
               f"({terminal_safe_line(summary)}); fix the evaluator or the seed before evolving")
    parts = []
    for key, label in (("candidate_traceback", "the seed's own traceback"), ("traceback", "traceback")):
        text = result.artifacts.get(key)
        if text and text.strip():
            parts.append(f"{label} (last {MAX_FRAMES} frames):\n{_indent(last_frames(text, evaluator=evaluator_path))}")
    if not parts:
        stderr = (result.artifacts.get("stderr") or "").strip()
        if stderr:
            parts.append(f"stderr (tail):\n{_indent(terminal_safe(stderr[-MAX_CHARS:]))}")
    parts.append("reproduce it (full traceback): "
                 + terminal_safe_line(reproduce_command(seed_path, evaluator_path, sandbox_type, limits, cascade, image)))
    return SeedFailed(message, "\n".join(parts))


def _indent(text: str) -> str:
    return "\n".join("    " + ln for ln in text.splitlines())
