"""Compile the evolved two-file C program (main.c includes poly.h), run it, score sin(x).

``program_path`` is the staged ``main.c`` of the evolved tree, ``poly.h`` beside it (gcc
finds a quoted include in the including file's directory). Score as in
examples/c_sine_approx: ``1 / (1 + 100 * max_abs_error)`` over 65 points of [0, pi/2].
"""

import math
import os
import shutil
import subprocess
import tempfile

POINTS = 64


def _fail(message, stage):
    return {"combined_score": 0.0, "error": message, "artifacts": {stage: message[-4000:]}}


def evaluate(program_path):
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        return _fail("no C compiler (gcc or cc) on the sandbox PATH", "compile")
    work = tempfile.mkdtemp(prefix="build-", dir=os.getcwd())
    exe = os.path.join(work, "candidate")
    build = subprocess.run([compiler, "-O1", "-std=c99", "-D_DEFAULT_SOURCE", "-o", exe, program_path, "-lm"],
                           capture_output=True, text=True, timeout=20)
    if build.returncode != 0:
        return _fail(f"gcc failed (exit {build.returncode}): {build.stderr.strip()}", "compile")
    run = subprocess.run([exe, str(POINTS)], capture_output=True, text=True, timeout=5)
    if run.returncode != 0:
        return _fail(f"the program exited with status {run.returncode}: {run.stderr.strip()}", "run")
    errors = []
    for line in run.stdout.splitlines():
        parts = line.split()
        if len(parts) != 2:
            return _fail(f"unexpected output line {line[:80]!r}; expected 'x value'", "run")
        x, y = float(parts[0]), float(parts[1])
        if not math.isfinite(y):
            return _fail(f"non-finite value at x={x}", "run")
        errors.append(abs(y - math.sin(x)))
    if len(errors) != POINTS + 1:
        return _fail(f"expected {POINTS + 1} output lines, got {len(errors)}", "run")
    return {"combined_score": 1.0 / (1.0 + 100.0 * max(errors)), "max_abs_error": max(errors)}
