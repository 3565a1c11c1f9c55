"""The transformers backend keeps transformers' logs, advisory warnings and progress bars
("Loading weights", the ``attention_mask`` notice) out of the user's terminal."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("transformers")
pytestmark = pytest.mark.slow  # a fresh interpreter importing transformers: seconds each

SCRIPT = """
import logging, os, sys
from transformers.utils import logging as hf_logging
{prelude}
from qdevolve.backends.transformers_backend import quiet_transformers
quiet_transformers()
print(hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled(), os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS"))
hf_logging.get_logger("transformers.generation.utils").warning("The attention mask is not set")
"""


def _run(prelude: str = "") -> subprocess.CompletedProcess[str]:
    # a fresh environment: quiet_transformers() called earlier in this test process sets
    # HF_HUB_DISABLE_PROGRESS_BARS and TRANSFORMERS_NO_ADVISORY_WARNINGS in os.environ
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "TRANSFORMERS_", "QDEVOLVE_TRANSFORMERS"))}
    return subprocess.run([sys.executable, "-c", SCRIPT.format(prelude=prelude)], capture_output=True, text=True,
                          timeout=120, env=env)


def test_quiet_transformers_silences_logs_and_bars() -> None:
    r = _run()
    assert r.returncode == 0, r.stderr
    verbosity, bars, hub = r.stdout.split()
    assert int(verbosity) == 40 and bars == "False" and hub == "1"  # logging.ERROR
    assert "attention mask" not in r.stderr


def test_verbose_env_keeps_them() -> None:
    r = _run('os.environ["QDEVOLVE_TRANSFORMERS_VERBOSE"] = "1"')
    assert r.returncode == 0, r.stderr
    verbosity, bars, _hub = r.stdout.split()
    assert int(verbosity) != 40 and bars == "True"
    assert "attention mask" in r.stderr
