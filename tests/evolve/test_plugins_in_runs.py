"""The worked plugin examples of docs/plugins.md, used by real runs."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest

from qdevolve import registry
from qdevolve.errors import PluginError
from qdevolve.types import Elite

from .conftest import QDEVOLVE

BOLTZMANN_FILE = Path(__file__).resolve().parents[2] / "plugins/qdevolve_boltzmann/qdevolve_boltzmann/selection.py"

# docs/plugins.md's operator (it edits only the EVOLVE-BLOCK bodies)
MUTATION_PLUGIN = '''
import re
from qdevolve import registry
from qdevolve.mutation.base import Candidate
from qdevolve.mutation.blocks import block_texts, splice_blocks

FLOAT = re.compile(r"(?<![\\w.])\\d+\\.\\d+(?![\\w.])")


@registry.mutation("scale_constants")
class ScaleConstants:
    """Multiply every float literal inside the EVOLVE-BLOCK regions by one factor from [0.5, 2]."""
    n_parents = 1
    needs_backend = False

    async def propose(self, parent, context, backend):
        f = float(context.rng.uniform(0.5, 2.0))
        bodies = [FLOAT.sub(lambda m: repr(float(m.group()) * f), body) for body in block_texts(parent.code)]
        code = splice_blocks(parent.code, bodies)
        return [Candidate(code=code, operator="scale_constants", parent_ids=(parent.id,))]
'''


def test_boltzmann_prefers_high_scores() -> None:
    pytest.importorskip("qdevolve_boltzmann", reason="plugins/qdevolve_boltzmann is not installed (make bootstrap installs it)")
    rule = registry.selection.create({"type": "boltzmann", "temperature": 0.1})
    elites = [Elite(program_id=str(i), score=float(i)) for i in range(5)]
    picks = rule.select(elites, np.random.default_rng(0), n=1000)
    assert sum(p.program_id == "4" for p in picks) > 800


@pytest.mark.slow
def test_run_with_installed_selection_and_file_mutation(tiny_example: Path, tmp_path: Path) -> None:
    pytest.importorskip("qdevolve_boltzmann", reason="plugins/qdevolve_boltzmann is not installed (make bootstrap installs it)")
    plugin = tmp_path / "my_plugins.py"
    plugin.write_text(MUTATION_PLUGIN)
    db = tmp_path / "p.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(tiny_example), "--sandbox", "local", "--db", str(db), "--iterations", "6",
                        "--selection", "boltzmann", "--mutation", "scale_constants", "--plugin", str(plugin),
                        "--no-progress"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(db)
    ops = {row[0] for row in con.execute("SELECT operator FROM programs")}
    assert ops == {"seed", "scale_constants"}
    (path, sha), = con.execute("SELECT path, sha256 FROM plugin_files").fetchall()
    assert path.endswith("my_plugins.py") and len(sha) == 64
    # resume re-loads the plugin file recorded in the run
    r = subprocess.run([*QDEVOLVE, "resume", "--db", str(db), "--iterations", "8", "--no-progress", "--trust", "plugins"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert con.execute("SELECT COUNT(*) FROM programs").fetchone()[0] == 9


def test_plugin_file_loads_boltzmann_without_install(tiny_example: Path, tmp_path: Path) -> None:
    with registry.snapshot():
        registry.selection.unregister("boltzmann")
        loaded = registry.load_plugin_file(BOLTZMANN_FILE)
        assert ("selection", "boltzmann") in loaded.names
        if "boltzmann" in registry.selection._eps():  # the package is installed too: a duplicate
            with pytest.raises(PluginError, match="selection.py and in entry point"):
                registry.selection.get("boltzmann")
        else:
            assert registry.selection.source("boltzmann") == str(BOLTZMANN_FILE)
