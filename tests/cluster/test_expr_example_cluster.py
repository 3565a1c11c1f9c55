"""examples/expr_evolution: the configured cluster tells programs apart (ast_shape did not:
every ``EXPR = "<string>"`` program had one key), and the objective trains on graded rewards."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

from qdevolve import registry

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "expr_evolution"
SEED = (EXAMPLE / "initial_program.py").read_text(encoding="utf-8")


def _evaluate(tmp_path: Path, expr: str) -> dict:
    spec = importlib.util.spec_from_file_location("expr_evaluator", EXAMPLE / "evaluator.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    program = tmp_path / f"p{abs(hash(expr))}.py"
    program.write_text(SEED.replace('EXPR = "x+1"', f'EXPR = "{expr}"'), encoding="utf-8")
    return module.evaluate(str(program))


def _config() -> dict:
    return yaml.safe_load((EXAMPLE / "config.yaml").read_text(encoding="utf-8"))


def test_configured_cluster_separates_behaviours_and_joins_equivalent_programs(tmp_path: Path) -> None:
    cluster = registry.cluster.create(_config()["train"]["cluster"])
    exprs = ["x+1", "x+2", "2*x+1", "3*x+1", "x*3+1", "x+x+x+1", "x-1", "(x+"]
    keys = {}
    for e in exprs:
        result = _evaluate(tmp_path, e)
        code = SEED.replace('EXPR = "x+1"', f'EXPR = "{e}"')
        keys[e] = cluster((e, {"code": code, "outputs": result["artifacts"]["outputs"]}))
    assert keys["3*x+1"] == keys["x*3+1"] == keys["x+x+x+1"]  # one behaviour
    distinct = {keys[e] for e in ("x+1", "x+2", "2*x+1", "3*x+1", "x-1", "(x+")}
    assert len(distinct) == 6
    ast_shape = registry.cluster.create({"type": "ast_shape"})
    assert len({ast_shape((e, {"code": SEED.replace('"x+1"', f'"{e}"')})) for e in exprs}) == 1  # why not ast_shape


def test_objective_trains_on_graded_rewards_counted_by_cluster() -> None:
    train = _config()["train"]
    assert train["objective"]["type"] == "ips"
    assert train["objective"].get("reward") == "raw" and train["objective"].get("key") == "cluster"
    assert train["reward"] == "improvement_clipped"  # graded: the clipped gain over the parent
    assert train["shaping"]["same_class"] < 0  # a repeated behaviour is not paid again
    readme = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    assert "its sandbox score is its reward" not in readme
    assert "reward: raw" in readme


def test_ast_shape_parse_strings_tells_expression_programs_apart() -> None:
    plain = registry.cluster.create({"type": "ast_shape"})
    parsed = registry.cluster.create({"type": "ast_shape", "parse_strings": True})
    code = {e: SEED.replace('"x+1"', f'"{e}"') for e in ("x+1", "x+2", "3*x+1", "x*3+1", "(x+")}
    assert len({plain(("", {"code": c})) for c in code.values()}) == 1
    keys = {e: parsed(("", {"code": c})) for e, c in code.items()}
    assert keys["x+1"] == keys["x+2"]  # constants stay abstract: one shape
    assert len({keys["x+1"], keys["3*x+1"], keys["x*3+1"], keys["(x+"]}) == 4
    assert parsed(("", {"code": 'MSG = "hello world"\n'})) == parsed(("", {"code": 'MSG = "other text"\n'}))
