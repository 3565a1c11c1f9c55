"""The problem suite of the joined loop: many integer-function targets, one shared policy.

A *target* is an integer function given by a few input/output examples (two to four, on
distinct inputs in ``0..7``), to be written as an expression of the DSL of
:mod:`qdevolve.rl.tasks.expr_dsl`. The examples underdetermine the function: several
**semantic classes** of correct programs exist for every target, a class being the tuple of
a program's outputs on the fixed wider probe set :data:`~qdevolve.rl.tasks.expr_dsl.PROBES`
(``x = -4..11``). A child earns one pass bit per example (partial credit; the bits are the
VPO reward vector); it is correct when every bit is set.

The training targets live in ``suite_targets.json`` beside this module; the held-out
targets in ``suite_heldout.json``, read only by :mod:`qdevolve.rl.tasks.suite_heldout`
(evaluation code) and never by a training path (``tests/rl/test_suite_heldout.py`` checks
that). Each target records its reference program, its examples, the number of semantic
classes of correct pool programs, and the frozen base's pass@1 from the seed parent
(measured by ``benchmarks/suite_calibrate.py``, which wrote both files), which grades the
suite from about 0.2 down to below 0.001.

Every target's evolution starts from the seed parent :data:`SEED_PARENT`; the policy's
prompt is the edit prompt of :mod:`qdevolve.rl.tasks.expr_edit` (examples, parent, the
parent's pass bits), so one policy serves every target. Its pre-training task is
:class:`SuiteEditTask` (``suite_edit``): edit pairs on random pool targets with two to four
examples, so it reads the examples and the parent's bits rather than memorising a target.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qdevolve.rl.tasks.base import Verdict
from qdevolve.rl.tasks.expr_dsl import (
    MAX_LEN,
    PROBES,
    DSLError,
    _eval,
    evaluate,
    parse,
    semantic_key,
    strategy_key,
)
from qdevolve.rl.tasks.expr_edit import ExprEditTask, edit_prompt, pass_bits

__all__ = ["SuiteTarget", "TARGETS_FILE", "SEED_PARENT", "INPUT_RANGE", "load_targets", "targets_from_json",
           "score_child", "ChildScore", "SuiteEditTask", "matching_classes"]

TARGETS_FILE = Path(__file__).with_name("suite_targets.json")
SEED_PARENT = "x"
INPUT_RANGE = tuple(range(8))  # example inputs are drawn from here


@dataclass(frozen=True)
class SuiteTarget:
    """One target: its examples, a reference program and its calibration."""

    name: str
    examples: tuple[tuple[int, int], ...]
    reference: str
    classes: int = 0          # semantic classes of correct programs in the expression pool
    base_pass1: float = 0.0   # the frozen base's pass@1 from SEED_PARENT (calibration)

    def prompt(self, parent: str) -> str:
        """The edit prompt asking for a child of ``parent`` (examples | parent | its bits)."""
        return edit_prompt(list(self.examples), parent, pass_bits(parent, list(self.examples)))

    def to_json(self) -> dict:
        return {"name": self.name, "examples": [list(p) for p in self.examples], "reference": self.reference,
                "classes": self.classes, "base_pass1": self.base_pass1}


def targets_from_json(data: list[dict], where: str) -> list[SuiteTarget]:
    """Targets from their JSON rows; a malformed row names the file and the target."""
    out = []
    for i, row in enumerate(data):
        try:
            t = SuiteTarget(name=str(row["name"]), examples=tuple((int(x), int(y)) for x, y in row["examples"]),
                            reference=str(row["reference"]), classes=int(row.get("classes", 0)),
                            base_pass1=float(row.get("base_pass1", 0.0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{where}: target #{i} ({row.get('name', '?') if isinstance(row, dict) else row!r}) "
                             f"is malformed: {exc}") from None
        if pass_bits(t.reference, list(t.examples)) != "1" * len(t.examples):
            raise ValueError(f"{where}: target {t.name}: reference {t.reference!r} does not fit its examples")
        out.append(t)
    return out


def load_targets(path: str | Path | None = None) -> list[SuiteTarget]:
    """The training targets (``suite_targets.json`` by default)."""
    p = Path(path) if path is not None else TARGETS_FILE
    return targets_from_json(json.loads(p.read_text()), str(p))


@dataclass(frozen=True)
class ChildScore:
    """A child's result on one target."""

    text: str
    bits: str               # one pass bit per example
    score: float            # fraction of examples passed
    correct: bool
    valid: bool
    semantic: str | None    # outputs on PROBES (the semantic class), None when invalid
    strategy: str | None

    @property
    def vector(self) -> list[float]:
        return [float(b == "1") for b in self.bits]


def score_child(target: SuiteTarget, completion: str) -> ChildScore:
    """Pass bits, score, correctness and keys of one completion on ``target``."""
    text = completion.strip().replace(" ", "")
    n = len(target.examples)
    if not text or len(text) > MAX_LEN:
        return ChildScore(text, "0" * n, 0.0, False, False, None, None)
    try:
        tree = parse(text)
        bits = "".join("1" if _eval(tree, x) == y else "0" for x, y in target.examples)
        sem = semantic_key(tree)
    except DSLError:
        return ChildScore(text, "0" * n, 0.0, False, False, None, None)
    return ChildScore(text, bits, bits.count("1") / n, bits == "1" * n, True, sem, strategy_key(text))


def matching_classes(examples: tuple[tuple[int, int], ...] | list[tuple[int, int]],
                     pool: dict[str, tuple[str, ...]]) -> list[str]:
    """Semantic keys of the pool's programs that pass every example (the target's correct classes)."""
    xs = [PROBES.index(x) for x, _ in examples]
    out = []
    for key in pool:
        vals = key.split(",")
        if all(int(vals[i]) == y for i, (_, y) in zip(xs, examples, strict=True)):
            out.append(key)
    return out


class SuiteEditTask(ExprEditTask):
    """Edit pairs for the suite's shared policy: random pool targets with 2-4 examples.

    As :class:`~qdevolve.rl.tasks.expr_edit.ExprEditTask`, but a target shows two, three or
    four examples on distinct inputs in ``0..7`` (the suite's format) and never reads the
    suite's files: the targets are random pool programs, so a suite target is seen only by
    chance.
    """

    name = "suite_edit"

    def _target(self, rng: np.random.Generator, pool: dict[str, tuple[str, ...]],
                keys: list[str]) -> tuple[str, list[tuple[int, int]]] | None:
        target = pool[keys[int(rng.integers(len(keys)))]][0]
        n = int(rng.integers(2, 5))
        xs = sorted(rng.choice(len(INPUT_RANGE), size=n, replace=False).tolist())
        try:
            pairs = [(INPUT_RANGE[x], evaluate(target, INPUT_RANGE[x])) for x in xs]
        except DSLError:
            return None
        if any(abs(y) > 999 for _, y in pairs):
            return None
        return target, pairs

    def prompts(self, split: str = "train") -> list[str]:
        """Prompts of the training targets from the seed parent (``test``: the same; the
        held-out targets are read only by evaluation code)."""
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        return [t.prompt(SEED_PARENT) for t in load_targets()]

    def verify(self, prompt: str, completion: str) -> Verdict:
        return super().verify(prompt, completion)
