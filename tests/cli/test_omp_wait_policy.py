"""The command line sets OpenMP's passive waiting before torch loads (a user's value wins)."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = ("import qdevolve.cli, os, torch; "
         "print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in __import__('sys').modules)")


def _probe(env: dict[str, str]) -> str:
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_cli_sets_passive_waiting_before_torch_and_keeps_the_users_value():
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    assert _probe(env) == "PASSIVE True"
    assert _probe({**env, "OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE True"
    # importing the command line module must not load torch itself (the setting has to come first)
    r = subprocess.run([sys.executable, "-c", "import qdevolve.cli, sys; print('torch' in sys.modules)"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.stdout.strip() == "False", r.stderr
