"""Reply parsers run in time linear in the reply, whatever markers it holds, and agree with
the regular expressions they replaced on every small reply (a differential fuzz test).

Times are the process's CPU time (``time.process_time``), so a loaded machine does not make a
linear parser look slow; the regular expression these parsers replaced spent 17.8 s of CPU on
400 unterminated SEARCH blocks, which no load explains away."""

from __future__ import annotations

import random
import re
import time

import pytest

from qdevolve.mutation._llm import ParseError, extract_code_blocks
from qdevolve.mutation.diff import parse_diff

# The expressions the parsers used before (cubic / quadratic on hostile replies): oracles on small inputs.
_OLD_BLOCK = re.compile(
    r"^[ \t]*<{5,9}[ \t]*SEARCH[^\n]*\n(.*?)^[ \t]*={5,9}[ \t]*\n(.*?)^[ \t]*>{5,9}[ \t]*REPLACE[^\n]*$",
    re.DOTALL | re.MULTILINE)
_OLD_MARK = re.compile(r"^[ \t]*<{5,9}[ \t]*SEARCH", re.MULTILINE)
_OLD_FENCE = re.compile(r"```[ \t]*([\w+.#-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def _old_parse(reply: str) -> list[tuple[str, str]] | str:
    marks = len(_OLD_MARK.findall(reply))
    if marks == 0:
        return "none"
    pairs = [(m.group(1)[:-1] if m.group(1).endswith("\n") else m.group(1),
              m.group(2)[:-1] if m.group(2).endswith("\n") else m.group(2)) for m in _OLD_BLOCK.finditer(reply)]
    return pairs if len(pairs) >= marks else "malformed"


def _new_parse(reply: str) -> list[tuple[str, str]] | str:
    try:
        return parse_diff(reply)
    except ParseError as exc:
        return "none" if "no SEARCH" in str(exc) else "malformed"


_PIECES = ["<<<<<<< SEARCH", "  <<<<< SEARCH extra", "<<<<<<<<<< SEARCH", "=======", "===== ", "==========",
           "\t=======", ">>>>>>> REPLACE", ">>>>> REPLACE tail", ">>>>>>>>>> REPLACE", "x = 1", "", "  y",
           "=======\r", "```python", "```", "``` py extra", "a```b", "<<<<<<< SEARCH\r"]


@pytest.mark.parametrize("seed", range(6))
def test_diff_parser_agrees_with_the_old_expression_on_random_replies(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(400):
        lines = [rng.choice(_PIECES) for _ in range(rng.randint(0, 14))]
        reply = "\n".join(lines) + rng.choice(["", "\n"])
        assert _new_parse(reply) == _old_parse(reply), reply


@pytest.mark.parametrize("seed", range(4))
def test_fence_extraction_agrees_with_the_old_expression(seed: int) -> None:
    rng = random.Random(100 + seed)
    for _ in range(400):
        text = rng.choice(["", "\n"]).join(rng.choice(_PIECES + ["```c++ x", "~~~", "é```λ\n"])
                                           for _ in range(rng.randint(0, 10)))
        assert extract_code_blocks(text) == [(m.group(1).lower(), m.group(2)) for m in _OLD_FENCE.finditer(text)], text


def _hostile(kind: str, n: int) -> str:
    if kind == "unterminated":  # every block lacks REPLACE: the old expression rescanned per divider
        return "<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n" * n
    if kind == "nested":
        return "<<<<<<< SEARCH\n" * n + "=======\n" * n + ">>>>>>> REPLACE\n"
    if kind == "dividers":
        return "<<<<<<< SEARCH\n" + "=======\n" * (4 * n)
    if kind == "long_line":
        return "<<<<<<< SEARCH " + "<" * (20 * n) + "\n" + " " * (20 * n)
    raise AssertionError(kind)


def _times(small, large, reps: int = 5) -> tuple[float, float]:
    """Median seconds of ``small()`` and ``large()``, run in turns (so both see the same load)."""
    ts, tl = [], []
    for _ in range(reps):
        for fn, out in ((small, ts), (large, tl)):
            t = time.process_time()
            fn()
            out.append(time.process_time() - t)
    return sorted(ts)[reps // 2], sorted(tl)[reps // 2]


@pytest.mark.parametrize("kind", ["unterminated", "nested", "dividers", "long_line"])
def test_hostile_diff_replies_of_1000_and_10000_pairs_parse_in_well_under_a_second(kind: str) -> None:
    for n in (1_000, 10_000):
        reply = _hostile(kind, n)
        t = time.process_time()
        with pytest.raises(ParseError):
            parse_diff(reply)
        assert time.process_time() - t < 1.0, (kind, n, len(reply))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["unterminated", "nested", "dividers", "long_line"])
def test_hostile_diff_replies_scale_linearly(kind: str) -> None:
    small_reply, large_reply = _hostile(kind, 5_000), _hostile(kind, 50_000)
    small, large = _times(lambda: pytest.raises(ParseError, parse_diff, small_reply),
                          lambda: pytest.raises(ParseError, parse_diff, large_reply))
    assert large < 20 * max(small, 1e-2), (kind, small, large)  # 10x the input, < 20x the time


def test_ten_thousand_complete_pairs_parse_in_well_under_a_second() -> None:
    reply = "".join(f"<<<<<<< SEARCH\nx = {i}\n=======\nx = {i + 1}\n>>>>>>> REPLACE\n" for i in range(10_000))
    t = time.process_time()
    pairs = parse_diff(reply)
    assert time.process_time() - t < 1.0
    assert len(pairs) == 10_000 and pairs[-1] == ("x = 9999", "x = 10000")


@pytest.mark.parametrize("text", ["```" * 70_000, "```" + "a" * 200_000, ("```py" + " x" * 5000) * 20,
                                  "```\n" + "`" * 200_000])
def test_hostile_fences_are_linear(text: str) -> None:
    t = time.process_time()
    extract_code_blocks(text)
    assert time.process_time() - t < 1.0


def test_nested_and_unterminated_markers_give_the_reason() -> None:
    nested = "<<<<<<< SEARCH\na\n<<<<<<< SEARCH\nb\n=======\nc\n>>>>>>> REPLACE\n"
    with pytest.raises(ParseError, match="2 SEARCH marker.* but 1 complete"):
        parse_diff(nested)
    with pytest.raises(ParseError, match="1 SEARCH marker.* but 0 complete"):
        parse_diff("<<<<<<< SEARCH\na\n=======\nb\n")
    with pytest.raises(ParseError, match="no SEARCH"):
        parse_diff("=======\n>>>>>>> REPLACE\n" * 100)
    # a REPLACE marker inside a SEARCH section is that section's text, as before
    tricky = "<<<<<<< SEARCH\n>>>>>>> REPLACE\n=======\nb\n>>>>>>> REPLACE"
    assert parse_diff(tricky) == [(">>>>>>> REPLACE", "b")] == _old_parse(tricky)


@pytest.mark.slow
@pytest.mark.parametrize("make", [
    lambda n: "@@ -1 +1 @@\n" * n,                                   # hunks with nothing in them
    lambda n: "@@" * (n * 10) + "\n",                                # one line of hunk openers
    lambda n: "@@ x @@\n" + "-a\n+b\n" * n,                          # one huge hunk
])
def test_hostile_unified_diffs_are_linear(make) -> None:
    from qdevolve.mutation.udiff import unified_pairs

    small, large = make(5_000), make(50_000)
    t_small, t_large = _times(lambda: unified_pairs(small), lambda: unified_pairs(large))
    assert t_large < 1.0 and t_large < 20 * max(t_small, 1e-2), (t_small, t_large)


@pytest.mark.slow
@pytest.mark.parametrize("make", [
    lambda n: "# EVOLVE-BLOCK-" * n + "\n",                          # near-markers on one line
    lambda n: ("# EVOLVE-BLOCK-START\nx = 1\n# EVOLVE-BLOCK-END\n") * n,
    lambda n: "# EVOLVE-BLOCK-START\n" * n,                          # unbalanced
])
def test_hostile_block_markers_are_linear(make) -> None:
    from qdevolve.mutation.blocks import find_blocks

    def scan(text: str) -> None:
        try:
            find_blocks(text)
        except ValueError:
            pass

    small, large = make(5_000), make(50_000)
    t_small, t_large = _times(lambda: scan(small), lambda: scan(large))
    assert t_large < 1.0 and t_large < 20 * max(t_small, 1e-2), (t_small, t_large)


def test_a_rewrite_reply_of_hostile_fences_is_read_fast() -> None:
    from qdevolve.mutation.rewrite import RewriteMutation
    from qdevolve.types import Program

    parent = Program(code="# EVOLVE-BLOCK-START\nx = 1\n# EVOLVE-BLOCK-END\n")
    reply = "```python x" * 15_000 + "\n" + "<<<<<<< SEARCH\n=======\n" * 2_000
    t = time.process_time()
    try:
        RewriteMutation().parse(reply, parent, [])
    except ParseError:
        pass
    assert time.process_time() - t < 1.0
