"""``benchmarks/gpu_smoke.sh --device cpu --small``: the GPU script's code path (sampling, a
LoRA step, adapter versions switched in place, the table) on CPU, as a real subprocess."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("peft")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_gpu_smoke_script_runs_on_cpu(tmp_path):
    env = {**os.environ, "PYTHON": os.environ.get("PYTHON", str(Path(__import__("sys").executable)))}
    env.pop("QDEVOLVE_GPU_MODEL", None)
    r = subprocess.run(["bash", "benchmarks/gpu_smoke.sh", "--device", "cpu", "--small", "--batch", "8",
                        "--new-tokens", "8"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gpu_smoke: OK" in r.stdout and "vLLM stages not requested" in r.stdout
    for name in ("smollm2-135m", "qwen2-1.5b"):
        assert name in r.stdout


@pytest.mark.slow
def test_gpu_smoke_fails_loudly_without_cuda():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    r = subprocess.run([__import__("sys").executable, "benchmarks/gpu_smoke.py"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode != 0 and "no CUDA device" in r.stderr
