"""Forgeries that need the three principals: a C candidate whose constructor runs as whoever
executes it (the evaluator, on the trusted side), and swaps of the ShinkaEvolve adapter's
results (a FIFO-timed replacement of ``metrics.json``, a module planted on its import path).

Each forged ``ok`` score on ``main`` before issue 19; parametrised over local, local warm,
bwrap, bwrap warm (root: the uid pool) and docker, docker warm (marked ``docker``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from qdevolve.evolve.compat.shinka_compat import adapter_evaluator
from qdevolve.sandbox.forgeries import PLANTED_MODULE, forged_record
from qdevolve.sandbox.limits import SandboxLimits
from qdevolve.sandbox.origin_attacks import FIFO_SWAP, PLANTED_SWAP, SHINKA_EVALUATE
from qdevolve.types import Program

from .test_principals import BACKENDS, box  # noqa: F401 - the parametrised fixture

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
LIMITS = SandboxLimits(wall_s=30.0, cpu_s=20.0, memory_mb=1024, processes=64)

# Python run by whatever imports it: walks up to the runner's record channel and nonce
# (``runner.finish``'s frame) and writes an ``ok`` record of its own.
def _plant(score: str) -> str:
    return PLANTED_MODULE % forged_record(score)


C_CONSTRUCTOR = r'''
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *PLANT = "__PLANT__";

static void plant_in(const char *dir) {
    const char *names[] = {"resource", "traceback", "linecache", "tokenize", "textwrap", "json", NULL};
    char path[4096];
    for (int i = 0; names[i]; i++) {
        snprintf(path, sizeof path, "%s/%s.py", dir, names[i]);
        FILE *fh = fopen(path, "w");
        if (fh) { fputs(PLANT, fh); fclose(fh); }
    }
}

__attribute__((constructor)) static void forge(void) {
    const char *dirs[] = {"/qdevolve/evaluator", ".", "/tmp", NULL};
    for (int i = 0; dirs[i]; i++) plant_in(dirs[i]);
    DIR *d = opendir("/qdevolve/evaluators");
    struct dirent *e;
    char path[4096];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/qdevolve/evaluators/%s", e->d_name);
        plant_in(path);
    }
    if (d) closedir(d);
}

// EVOLVE-BLOCK-START
static double approx_sin(double x) { return x; }
// EVOLVE-BLOCK-END

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 64;
    for (int i = 0; i <= n; i++) {
        double x = (M_PI / 2.0) * i / n;
        printf("%.17g %.17g\n", x, approx_sin(x));
    }
    printf("not numbers\n");  /* the evaluator's float() raises: its failure path runs */
    return 0;
}
'''


def _c_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("box", [p for p in BACKENDS if p.values[0][0] != "docker"], indirect=True)
def test_c_constructor_cannot_forge_the_sine_example(box):  # noqa: F811
    """The compiled candidate runs as the evaluator's child (the runner's uid): its
    constructor plants modules wherever it can, then its output makes the evaluator raise.
    Process backends only: the docker image carries no C compiler, so the C example does
    not run there."""
    code = C_CONSTRUCTOR.replace("__PLANT__", _c_string(_plant("1.0")))
    r = box.evaluate(Program(code=code, language="c"), str(REPO / "examples/c_sine_approx/evaluator.py"), LIMITS)
    assert not (r.status == "ok" and r.score == 1.0), "forged: the planted module wrote the record"
    assert r.status == "error" and r.score is None, (r.status, r.score, r.error)
    assert "ValueError" in (r.error or ""), r.error


def _shinka(tmp_path: Path) -> Path:
    d = tmp_path / "shinka"
    d.mkdir()
    (d / "evaluate.py").write_text(SHINKA_EVALUATE)
    (d / "helper.py").write_text("X = 1\n")  # a sibling module: on main, a shinka-modules-* dir
    return adapter_evaluator(d / "evaluate.py")


@pytest.mark.parametrize("attack", ["fifo_swap", "planted_module"])
def test_shinka_adapter_results_cannot_be_swapped(box, tmp_path, attack):  # noqa: F811
    adapter = _shinka(tmp_path)
    code = FIFO_SWAP if attack == "fifo_swap" else PLANTED_SWAP.replace("__PLANT__", repr(_plant("1e99")))
    r = box.evaluate(Program(code=code), str(adapter), LIMITS)
    assert r.status == "ok", (r.status, r.error, r.artifacts)
    assert r.score == 0.25, f"forged: {r.score}"


def test_shinka_results_dir_is_private(tmp_path):
    """The adapter's results directory: mode 0700, this uid's; links and FIFOs are refused."""
    import runpy

    adapter = _shinka(tmp_path)
    ns = runpy.run_path(str(adapter))
    d = ns["_private_dir"]("shinka-results-")
    try:
        assert os.stat(d).st_mode & 0o777 == 0o700
        os.mkfifo(os.path.join(d, "metrics.json"))
        with pytest.raises(RuntimeError, match="not a regular file"):
            ns["_read_json"](os.path.join(d, "metrics.json"))
        os.symlink("/etc/hostname", os.path.join(d, "correct.json"))
        with pytest.raises(OSError):
            ns["_read_json"](os.path.join(d, "correct.json"))
    finally:
        shutil.rmtree(d)
