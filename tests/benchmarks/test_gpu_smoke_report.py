"""benchmarks/reports/gpu_smoke_cpu.py renders gpu_smoke.py's rows from the raw numbers and says where
they were measured by rule (CUDA only when every row ran on a CUDA device); gpu_smoke.py writes its
raw file only when asked (``--raw``), so its slow CPU test leaves benchmarks/results/ alone."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
_spec = importlib.util.spec_from_file_location("gpu_smoke_renderer",
                                               ROOT / "benchmarks" / "reports" / "gpu_smoke_cpu.py")
renderer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(renderer)


def row(model: str, device: str = "cpu", small: bool = True, **kw: float) -> dict[str, Any]:
    base = {"model": model, "params_M": 0.3, "tokens_per_s": 12.34, "tokens": 64, "sampling_s": 5.2,
            "lora_step_s": 3.456, "adapter_MB": 0.0812, "swap_s": 0.1164, "device": device,
            "dtype": "float32" if device == "cpu" else "bfloat16", "small": small}
    return {**base, **kw}


def synthetic(rows: list[dict[str, Any]], cuda_device: str | None = None) -> dict[str, Any]:
    return {"meta": {"commit": "abc", "seeds": [0]},
            "settings": {"device": rows[0]["device"] if rows else "cpu", "cuda_device": cuda_device,
                         "dtype": "float32", "small": True, "batch": 8, "group": 4, "new_tokens": 8, "lora_r": 8,
                         "versions": {"torch": "2.13", "transformers": "5", "peft": "0.21"}},
            "rows": rows}


def _cells(table: str, start: str) -> list[str]:
    (line,) = [ln for ln in table.splitlines() if ln.startswith(f"| {start} |")]
    return [c.strip() for c in line.strip("|").split("|")]


def test_the_table_follows_the_numbers() -> None:
    out = renderer.render(synthetic([row("smollm2-135m"), row("qwen2-1.5b", tokens_per_s=20.0, swap_s=0.0654)]))
    assert _cells(out["table"], "smollm2-135m (small)") == ["smollm2-135m (small)", "0.3", "12.3", "3.46", "0.08",
                                                            "0.116", "cpu", "float32"]
    assert _cells(out["table"], "qwen2-1.5b (small)")[2:6] == ["20.0", "3.46", "0.08", "0.065"]
    assert "2 prompts x 4 samples" in out["setup"] and "8 new tokens" in out["setup"] and "LoRA rank 8" in out["setup"]
    full = renderer.render(synthetic([row("qwen2-1.5b", small=False, params_M=1543.7)]))
    assert _cells(full["table"], "qwen2-1.5b")[1] == "1543.7" and "Models of the full configs" in full["setup"]


def test_where_it_ran_is_read_from_the_rows() -> None:
    cpu = renderer.render(synthetic([row("smollm2-135m"), row("qwen2-1.5b")]))["setup"]
    assert cpu.startswith("Measured on cpu, not on a GPU") and "CUDA" not in cpu
    cuda = renderer.render(synthetic([row("smollm2-135m", "cuda"), row("qwen2-1.5b", "cuda:0")], "NVIDIA H100"))
    assert cuda["setup"].startswith("Measured on CUDA (NVIDIA H100).") and "not on a GPU" not in cuda["setup"]
    mixed = renderer.render(synthetic([row("smollm2-135m", "cuda"), row("qwen2-1.5b", "cpu")]))["setup"]
    assert mixed.startswith("Measured on cpu, cuda, not on a GPU")
    assert not renderer.on_cuda([])


def test_gpu_smoke_writes_a_raw_file_only_with_raw() -> None:
    spec = importlib.util.spec_from_file_location("gpu_smoke_script", ROOT / "benchmarks" / "gpu_smoke.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)  # imports no model code: torch and transformers load inside main()
    assert script.parser().parse_args(["--device", "cpu", "--small"]).raw is None
    assert script.parser().parse_args(["--raw", "gpu_smoke_cpu"]).raw == "gpu_smoke_cpu"
