"""docs/config.md documents every key the ``run:`` section accepts (``max_evaluations`` included)."""

from __future__ import annotations

import re
from pathlib import Path

from qdevolve.evolve.setup.config import RUN_KEYS, parse_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "config.md"


def test_every_run_key_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"```yaml\nrun:\n(.*?)\n\S", text, flags=re.S).group(1)
    documented = set(re.findall(r"^  (\w+):", block, flags=re.M))
    missing = [k for k in RUN_KEYS if k not in documented]
    assert not missing, f"docs/config.md's run: section lacks {missing}"


def test_max_evaluations_is_the_budget() -> None:
    assert parse_config({"run": {"max_evaluations": 7}}, where="c.yaml").iterations == 7
    assert parse_config({"run": {"iterations": 3, "max_evaluations": 7}}, where="c.yaml").iterations == 7
