"""The benchmark's neutral mutation server: it reads only the parent program from a prompt,
edits only inside the EVOLVE-BLOCK, is seeded, and answers as an OpenAI-compatible server."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import mutation_server as ms  # noqa: E402

PARENT = (ROOT / "examples" / "circle_packing" / "initial_program.py").read_text()
OTHER = "def other():\n    return 42\n"

PROMPTS = {  # the three frameworks' layouts: other programs before and after the parent
    "openevolve": f"# Current Program Information\n- Fitness: 1.6\n# Program Evolution History\n```python\n{OTHER}```\n"
                  f"# Current Program\n```python\n{PARENT}```\n# Task\nRewrite.\n```python\n# Your rewritten program here\n```",
    "shinka": f"# Current program\n\nHere is the current program we are trying to improve:\n\n```python\n{PARENT}```\n\n"
              "Here are the performance metrics of the program:\n\ncombined_score: 1.6",
    "qdevolve": f"# Current program metrics\nscore 1.6\n## Inspiration\n```python\n{OTHER}```\n# Current program\n"
                f"```python\n{PARENT}```\n\n# Task\nReturn the complete program in a single ```python fenced block.",
}


@pytest.mark.parametrize("layout", sorted(PROMPTS))
def test_the_parent_is_the_block_after_the_current_program_heading(layout: str) -> None:
    assert ms.find_parent(PROMPTS[layout]) == PARENT


def test_no_heading_no_parent() -> None:
    assert ms.find_parent(f"Improve this:\n```python\n{PARENT}```") is None


def test_everything_but_the_parent_is_ignored() -> None:
    a = ms.mutate(ms.find_parent(PROMPTS["openevolve"]), 5, 3)
    b = ms.mutate(ms.find_parent(PROMPTS["qdevolve"]), 5, 3)
    assert a == b  # same parent, call and seed: same child whatever else the prompt says


def test_edits_are_seeded_compile_and_stay_inside_the_block() -> None:
    head, rest = PARENT.split("# EVOLVE-BLOCK-START\n")
    _, tail = rest.split("# EVOLVE-BLOCK-END\n")
    children = set()
    for call in range(1, 41):
        child, what = ms.mutate(PARENT, call, 0)
        assert (child, what) == ms.mutate(PARENT, call, 0)
        compile(child, "<child>", "exec")
        assert child.startswith(head + "# EVOLVE-BLOCK-START\n" + f"# bench_samples call {call}\n")
        assert child.endswith("# EVOLVE-BLOCK-END\n" + tail)
        assert ms.TAG.sub("", child) != PARENT
        children.add(child)
        grandchild, _ = ms.mutate(child, call + 100, 0)
        assert grandchild.count("# bench_samples call") == 1  # the parent's tag is replaced
    assert len(children) == 40
    assert ms.mutate(PARENT, 1, 0) != ms.mutate(PARENT, 1, 1)


def test_http_round_trip_and_log(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "mutation_server.py"), "--seed", "2",
                             "--log", str(log)], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().split()[1]
        body = json.dumps({"model": "m", "messages": [{"role": "system", "content": "x"},
                                                      {"role": "user", "content": PROMPTS["shinka"]}]}).encode()
        req = urllib.request.Request(url + "/chat/completions", body, {"Content-Type": "application/json"})
        reply = json.loads(urllib.request.urlopen(req, timeout=10).read())
        text = reply["choices"][0]["message"]["content"]
        assert "<CODE>\n```python\n" in text and ms.mutate(PARENT, 1, 2)[0] in text
        assert [json.loads(line)["call"] for line in log.read_text().splitlines()] == [1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_last_current_program_heading_wins() -> None:
    quoted = f"# Previous attempt\n# Current program\n```python\n{OTHER}```\n"
    assert ms.find_parent(quoted + PROMPTS["shinka"]) == PARENT
    assert ms.find_parent("# Current Program Information\n```python\n" + OTHER + "```\n") is None
