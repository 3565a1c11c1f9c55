"""The viewer on a run of agents: per-task tables (held-out apart) and self-modification diffs,
checked over HTTP against a real ``qdevolve serve`` process."""

from __future__ import annotations

import html
from collections.abc import Iterator

import pytest

from qdevolve.types import Program
from tests.cli.test_lineage_agents import build_agents_run

from .conftest import Server


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, Program]]]:
    path = tmp_path_factory.mktemp("agents-view") / "agents.sqlite"
    programs = build_agents_run(path)
    server = Server(path)
    yield server, programs
    server.stop()


def test_tree_api_shows_the_agent_lineage(agents: tuple[Server, dict[str, Program]]) -> None:
    server, P = agents
    tree = server.json(f"/api/runs/{P['seed'].run_id[:8]}/tree")
    nodes = {n["id"]: n for n in tree["nodes"]}
    assert set(nodes) == {p.id for p in P.values()}
    assert nodes[P["one"].id]["op"] == "self" and nodes[P["one"].id]["parent"] == P["seed"].id
    assert nodes[P["bad"].id]["status"] == "error" and nodes[P["one"].id]["best"]


def test_program_api_splits_scoring_and_held_out_tasks(agents: tuple[Server, dict[str, Program]]) -> None:
    server, P = agents
    tasks = server.json(f"/api/programs/{P['one'].id[:6]}")["tasks"]
    assert tasks["parent_id"] == P["seed"].id
    assert [r["task"] for r in tasks["scoring"]["rows"]] == ["circle_packing", "sort_speed"]
    assert [r["task"] for r in tasks["heldout"]["rows"]] == ["knapsack"]
    cp = tasks["scoring"]["rows"][0]
    assert (cp["score"], cp["parent"]) == (0.65, 0.4) and cp["change"] == pytest.approx(0.25)
    assert tasks["scoring"]["mean"] == pytest.approx(0.7) and tasks["heldout"]["mean"] == pytest.approx(0.45)
    seed = server.json(f"/api/programs/{P['seed'].id[:6]}")["tasks"]
    assert seed["parent_id"] is None and seed["heldout"]["rows"][0]["parent"] is None
    assert server.json(f"/api/programs/{P['bad'].id[:6]}")["tasks"] is None  # failed: no task scores


def test_program_page_shows_task_tables_and_the_self_modification(agents: tuple[Server, dict[str, Program]]) -> None:
    server, P = agents
    status, _, body = server.get(f"/programs/{P['two'].id}")
    page = html.unescape(body.decode())
    assert status == 200
    scoring = page.split('id="tasks-scoring"', 1)[1].split("</table>", 1)[0]
    held = page.split('id="tasks-heldout"', 1)[1].split("</table>", 1)[0]
    assert "circle_packing" in scoring and "knapsack" not in scoring
    assert "knapsack" in held and "circle_packing" not in held
    assert "+0.1" in scoring and "-0.2" in scoring  # 0.5 vs 0.4, 0.4 vs 0.6
    assert "-0.1" in held  # 0.2 vs 0.3
    assert "Self-modification: diff against parent" in page and "tools.generate" in page
    _, _, plain = server.get(f"/programs/{P['seed'].id}")
    assert b'id="tasks-heldout"' in plain and b"Self-modification" not in plain
