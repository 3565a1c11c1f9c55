"""The model path of ``benchmarks/gpu_smoke.py`` (sampling in the ``transformers`` backend, one LoRA
trainer step, adapter versions saved and switched in place) as measured, from
``benchmarks/results/gpu_smoke_cpu.json`` alone.

One row per model config; each figure is one measurement, not a median (the script is a smoke
check: every check it makes raises on failure, and the raw file is written only when all passed):

* **params (M)**: the model's parameters (``--small``: 2 layers, 64-wide, vocabulary at most 4,096);
* **tokens/s**: completion tokens of one ``generate_sync`` call (``batch // group`` prompts x ``group``
  samples, after one warm-up call) divided by that call's wall seconds;
* **LoRA step (s)**: wall seconds of one ``PolicyTrainer.step`` on those completions;
* **adapter (MB)**: bytes on disk of the first saved adapter version / 10^6;
* **adapter swap (s)**: wall seconds of one ``load_policy`` switch from version 1 to version 2.

**Where it ran** is read from the rows' devices, by rule: "measured on CUDA" only when every row's
device is a CUDA device; otherwise the table says these are not GPU figures.
"""

from __future__ import annotations

from typing import Any


def on_cuda(rows: list[dict[str, Any]]) -> bool:
    """Whether every row was measured on a CUDA device (``False`` with no rows)."""
    return bool(rows) and all(str(r.get("device", "")).startswith("cuda") for r in rows)


def render(raw: dict[str, Any]) -> dict[str, str]:
    s, rows = raw["settings"], raw["rows"]
    lines = ["| model | params (M) | tokens/s | LoRA step (s) | adapter (MB) | adapter swap (s) | device | dtype |",
             "|---|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        label = f"{r['model']} (small)" if r.get("small") else r["model"]
        lines.append(f"| {label} | {r['params_M']:.1f} | {r['tokens_per_s']:.1f} | {r['lora_step_s']:.2f} | "
                     f"{r['adapter_MB']:.2f} | {r['swap_s']:.3f} | {r['device']} | {r['dtype']} |")
    devices = sorted({str(r.get("device")) for r in rows})
    if on_cuda(rows):
        where = f"Measured on CUDA ({s.get('cuda_device') or ', '.join(devices)})."
    else:
        where = (f"Measured on {', '.join(devices) or 'no device'}, not on a GPU: these figures check the code path "
                 f"and say nothing about GPU throughput.")
    small = all(r.get("small") for r in rows)
    v = s.get("versions") or {}
    versions = ", ".join(f"{k} {v[k]}" for k in ("torch", "transformers", "peft") if v.get(k))
    setup = (f"{where} {'2-layer, 64-wide models of the configs' if small else 'Models of the full configs'}, "
             f"random weights; batch {s['batch']} ({s['batch'] // s['group']} prompts x {s['group']} samples), "
             f"{s['new_tokens']} new tokens, LoRA rank {s.get('lora_r', '?')}; one measurement per figure"
             + (f"; {versions}." if versions else "."))
    return {"setup": setup, "table": "\n".join(lines)}
