"""Fixtures of the scale-out tests: a real Ray cluster (``.ci/run`` starts one and exports
``QDEVOLVE_TEST_RAY_ADDRESS``) and real evaluators written to disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

EVALUATOR = '''\
import importlib.util
import time


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    value = float(module.value())
    time.sleep(getattr(module, "SLEEP", 0.0))
    return {"combined_score": value, "value": value}
'''


@pytest.fixture(scope="session")
def ray_address() -> str:
    """``HOST:PORT`` of the test cluster (tests marked ``ray`` skip without it)."""
    addr = os.environ.get("QDEVOLVE_TEST_RAY_ADDRESS")
    if not addr:
        pytest.skip("QDEVOLVE_TEST_RAY_ADDRESS is not set; .ci/run starts a local Ray cluster and exports it")
    pytest.importorskip("ray")
    return addr


@pytest.fixture(scope="session")
def evaluator_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An OpenEvolve-style evaluator: imports the program, sleeps ``SLEEP`` s, scores ``value()``."""
    path = tmp_path_factory.mktemp("evaluator") / "evaluator.py"
    path.write_text(EVALUATOR)
    return path


def program_code(value: float, sleep: float = 0.0) -> str:
    return f"SLEEP = {sleep}\n\n\ndef value():\n    return {value}\n"
