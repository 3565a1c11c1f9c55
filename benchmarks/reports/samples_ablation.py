"""The one-change-at-a-time ablation of qdevolve's search on the tuning tasks, rendered from
``benchmarks/results/samples_ablation.json`` (its variants' runs plus the default's,
OpenEvolve's and ShinkaEvolve's runs copied from ``samples.json`` by ``bench_samples.py
--add-reference``). Each variant is measured against each framework with the ratio, interval
and verdict rule of ``benchmarks/reports/samples.py``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("samples_tables", Path(__file__).with_name("samples.py"))
_samples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_samples)

__all__ = ["render"]
RAW_NAMES = ("samples_ablation10", "samples_ablation10_heldout")  # 10 seeds on today's code, own default runs


def render(raw: dict) -> dict[str, str]:
    """Table id -> markdown: ``ablation`` (ratios per arm, task and framework) and ``arms`` (what each changes)."""
    return _samples.render_ablation(raw)
