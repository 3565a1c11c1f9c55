"""The ``record:`` block of config.yaml: validated when loaded, shown as a gap in the run summary."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from qdevolve.errors import ConfigError
from qdevolve.evolve.report.summary import summarize
from qdevolve.evolve.setup.best_known import parse_record, record_line
from qdevolve.evolve.setup.config import RunConfig, parse_config


def test_record_is_parsed_and_stored_in_the_config() -> None:
    cfg = parse_config({"record": {"value": 2.5, "direction": "max", "source": "paper", "metric": "m"}},
                       where="c.yaml")
    assert cfg.record == {"value": 2.5, "direction": "max", "source": "paper", "metric": "m"}
    assert RunConfig.from_dict(cfg.to_dict()).record == cfg.record  # survives the run row (resume)
    assert parse_config({}, where="c.yaml").record is None


@pytest.mark.parametrize(("record", "message"), [
    ({"value": 1, "direction": "max"}, "'record.source' is required"),
    ({"value": "x", "direction": "max", "source": "s"}, "'record.value' must be a finite number"),
    ({"value": float("nan"), "direction": "max", "source": "s"}, "'record.value' must be a finite number"),
    ({"value": True, "direction": "max", "source": "s"}, "'record.value' must be a finite number"),
    ({"value": 1, "direction": "up", "source": "s"}, "'record.direction' must be 'max' or 'min'"),
    ({"value": 1, "direction": "min", "source": ""}, "'record.source' must be a non-empty string"),
    ({"value": 1, "direction": "min", "source": "s", "metric": 3}, "'record.metric' must be a non-empty string"),
    ({"value": 1, "direction": "min", "source": "s", "target": 2}, "unknown key 'target' at 'record'"),
    ([1, 2], "'record' must be a mapping"),
])
def test_a_bad_record_is_an_error_naming_the_file_and_key(record, message) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"record": record}, where="ex/config.yaml")
    assert "ex/config.yaml" in str(err.value) and message in str(err.value)


def test_gap_is_positive_while_the_record_stands_in_both_directions() -> None:
    mx = parse_record({"value": 3.0, "direction": "max", "source": "A"}, where="c")
    mn = parse_record({"value": 0.38, "direction": "min", "source": "B"}, where="c")
    assert record_line(mx, 2.5) == "best 2.5, record 3 (A), gap +0.5, 16.7% of the record"
    assert "gap +0.02" in record_line(mn, 0.40)
    assert "gap -0.01" in record_line(mn, 0.37)  # beaten
    assert record_line(mx, None) == "best -, record 3 (A)"


def _evo(record, best_score=-0.4, metrics=None):
    ledger = SimpleNamespace(budget=10, seed_score=-0.5, best_score=best_score, best_id="p1", by_status={"ok": 3},
                             stop_reason=None)
    store = SimpleNamespace(target="db", count_evaluations=lambda run_id: 3,
                            get_evaluation=lambda pid: SimpleNamespace(metrics=metrics or {}))
    return SimpleNamespace(ledger=ledger, store=store, run_id="r", archive=SimpleNamespace(stats=lambda: {}),
                           novelty=None, budget=SimpleNamespace(tokens=0), config=SimpleNamespace(record=record))


def test_summary_reads_the_named_metric_of_the_best_program() -> None:
    record = {"value": 0.38, "direction": "min", "source": "S", "metric": "bound"}
    summary = summarize(_evo(record, metrics={"bound": 0.4}), 1.0)
    assert summary.record is not None and summary.record.startswith("best 0.4, record 0.38 (S), gap +0.02")
    no_metric = summarize(_evo({"value": 1.0, "direction": "max", "source": "S"}, best_score=0.75), 1.0)
    assert no_metric.record.startswith("best 0.75, record 1 (S), gap +0.25")
    assert summarize(_evo(None), 1.0).record is None
