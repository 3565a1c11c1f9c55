"""Every config key docs/openevolve.md and docs/shinka.md document as mapped is mapped where
they say (and raises no warning); the keys documented as ignored or unmapped behave so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qdevolve.evolve.setup.config import parse_config

DOCS = Path(__file__).resolve().parents[2] / "docs"

OPENEVOLVE = {
    "max_iterations": 9, "random_seed": 4, "diff_based_evolution": False, "max_code_length": 5000,
    "log_level": "INFO", "log_dir": "logs", "checkpoint_interval": 10, "language": "python",
    "file_suffix": ".py",
    "llm": {"api_base": "http://127.0.0.1:9/v1", "models": [{"name": "m1", "weight": 0.7}, {"name": "m2", "weight": 0.3}],
            "temperature": 0.6, "top_p": 0.9, "max_tokens": 2048, "timeout": 30, "retries": 2,
            "api_key": "${MY_KEY}", "retry_delay": 1, "evaluator_models": []},
    "database": {"num_islands": 3, "migration_interval": 7, "migration_rate": 0.2,
                 "feature_dimensions": ["complexity", "diversity"], "feature_bins": 5, "archive_size": 30,
                 "exploration_ratio": 0.2, "exploitation_ratio": 0.6, "db_path": "x", "in_memory": True,
                 "log_prompts": True, "population_size": 100, "elite_selection_ratio": 0.1},
    "evaluator": {"timeout": 12, "cascade_evaluation": True, "cascade_thresholds": [0.3, 0.6],
                  "parallel_evaluations": 3, "enable_artifacts": True, "max_retries": 2,
                  "use_llm_feedback": True},
    "prompt": {"system_message": "be brief", "include_artifacts": True, "max_artifact_bytes": 4096,
               "num_top_programs": 4, "num_diverse_programs": 1, "use_template_stochasticity": True},
}


def _warned(cfg) -> str:
    return " ".join(cfg.warnings)


def test_openevolve_mapping_table() -> None:
    cfg = parse_config(OPENEVOLVE, where="openevolve.yaml")
    assert (cfg.iterations, cfg.seed, cfg.workers) == (9, 4, 3)
    assert {m["type"]: m["weight"] for m in cfg.mutation} == pytest.approx({"rewrite": 0.9, "crossover": 0.1})
    b = cfg.backend
    assert b["type"] == "openai" and b["api_base"] == "http://127.0.0.1:9/v1"
    assert [(m["name"], m["weight"]) for m in b["models"]] == [("m1", 0.7), ("m2", 0.3)]
    assert b.get("api_key_env") == "MY_KEY" and "api_key" not in b
    assert cfg.archive["type"] == "islands" and cfg.archive["n_islands"] == 3
    assert cfg.archive["migration_interval"] == 7 and cfg.archive["migration_fraction"] == pytest.approx(0.2)
    assert cfg.limits["wall_s"] == 12
    assert list(cfg.evaluator["cascade_thresholds"]) == [0.3, 0.6]
    assert (cfg.inspirations["n_best"], cfg.inspirations["n_diverse"]) == (4, 1)
    assert cfg.prompt["system_message"] == "be brief" and cfg.prompt["max_code_length"] == 5000
    warned = _warned(cfg)
    for key in ("population_size", "elite_selection_ratio", "use_llm_feedback", "use_template_stochasticity"):
        assert key in warned, f"{key} is documented as warned about"
    quiet = ("log_level", "log_dir", "checkpoint_interval", "file_suffix", "db_path", "in_memory",
             "log_prompts", "enable_artifacts", "max_retries", "retry_delay", "evaluator_models")
    for key in quiet:
        assert key not in warned, f"{key} is documented as quietly ignored"
    rows = re.findall(r"^\| `([^`]+)`[^|]*\| (.*)$", (DOCS / "openevolve.md").read_text(encoding="utf-8"), re.M)
    mapped = [key for key, doc in rows if not doc.startswith("not mapped")]
    assert len(mapped) >= 15
    for key in mapped:
        leaf = key.split(".")[-1].split("(")[0]
        assert leaf not in warned, f"documented key {key} is warned about as unmapped"


def test_openevolve_diff_based_default() -> None:
    cfg = parse_config({"max_iterations": 3, "diff_based_evolution": True,
                        "llm": {"api_base": "http://127.0.0.1:9/v1", "models": [{"name": "m"}]}}, where="c.yaml")
    assert {m["type"]: m["weight"] for m in cfg.mutation} == pytest.approx(
        {"diff": 0.8, "rewrite": 0.1, "crossover": 0.1})


SHINKA = {
    "evo_config": {"num_generations": 7, "max_parallel_jobs": 2, "max_proposal_jobs": 3,
                   "llm_models": ["m1", "m2"], "llm_kwargs": {"temperatures": [0.4, 0.8], "max_tokens": 1000},
                   "patch_types": ["diff", "full", "cross"], "patch_type_probs": [0.5, 0.3, 0.2],
                   "task_sys_msg": "optimise", "max_api_costs": 2.0, "code_embed_sim_threshold": 0.97,
                   "language": "python", "init_program_path": "initial.py", "results_dir": "r", "job_type": "local"},
    "db_config": {"num_islands": 2, "migration_interval": 4, "migration_rate": 0.3,
                  "parent_selection_strategy": "weighted", "parent_selection_lambda": 5.0,
                  "num_top_k_inspirations": 2, "num_archive_inspirations": 3},
}


def test_shinka_mapping_table() -> None:
    cfg = parse_config(SHINKA, where="shinka.yaml")
    assert (cfg.iterations, cfg.workers, cfg.max_pending) == (7, 2, 3)
    assert [m["name"] for m in cfg.backend["models"]] == ["m1", "m2"]
    assert cfg.backend.get("temperature") == pytest.approx(0.4) and cfg.backend.get("max_tokens") == 1000
    assert {m["type"]: m["weight"] for m in cfg.mutation} == pytest.approx(
        {"diff": 0.5, "rewrite": 0.3, "crossover": 0.2})
    assert cfg.prompt["system_message"] == "optimise"
    assert cfg.archive["type"] == "islands" and cfg.archive["n_islands"] == 2
    assert cfg.selection["type"] == "dgm"
    assert (cfg.inspirations["n_best"], cfg.inspirations["n_diverse"]) == (2, 3)
    assert cfg.budget["max_cost"] == 2.0 and cfg.novelty["threshold"] == pytest.approx(0.97)
    assert not cfg.warnings, "every field used here is documented as mapped or read from the layout"


@pytest.mark.parametrize("strategy, expected", [("power_law", "power_law"), ("hill_climbing", "tournament"),
                                                ("beam_search", "tournament")])
def test_shinka_selection_strategies(strategy: str, expected: str) -> None:
    cfg = parse_config({"db_config": {"parent_selection_strategy": strategy}, "evo_config": {"num_generations": 2}},
                       where="s.yaml")
    assert cfg.selection["type"] == expected
