"""Programs of several files (qdevolve.programtree and its users): the serialisation, path
attacks, seed directories, per-file replies, the engine's per-file check and the prompt."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import numpy as np
import pytest

from qdevolve.db.store import open_store
from qdevolve.errors import EvaluationSetupError
from qdevolve.evolve.core.hooks import fixed_code_checked
from qdevolve.evolve.setup.example import load_example
from qdevolve.mutation.ast_mutator import ASTMutation
from qdevolve.mutation.base import Candidate, MutationContext
from qdevolve.mutation.diff import DiffMutation
from qdevolve.mutation.rewrite import RewriteMutation
from qdevolve.mutation.tree_edit import parse_tree_reply, tree_violation
from qdevolve.programtree import (
    MAX_FILES,
    ProgramTree,
    TreeError,
    dump_tree,
    file_pairs,
    is_tree,
    parse_tree,
    read_tree_dir,
)
from qdevolve.prompts import build_prompt
from qdevolve.types import EvalResult, Program

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "multi_file"
MAIN = "import heuristics\n\n\ndef score():\n    return heuristics.h() * K\n\n# EVOLVE-BLOCK-START\nK = 2\n# EVOLVE-BLOCK-END\n"
HEUR = "# EVOLVE-BLOCK-START\ndef h():\n    x = 3\n    return x\n# EVOLVE-BLOCK-END\n"
FIXED = "def helper():\n    return 1\n"


def _tree() -> ProgramTree:
    return ProgramTree({"main.py": MAIN, "heuristics.py": HEUR, "util/fixed.py": FIXED}, "main.py")


def _parent() -> Program:
    return Program(code=dump_tree(_tree()))


def test_round_trip_is_exact_whatever_the_text_holds() -> None:
    tricky = "# --- file: evil.py (3 chars)\nabc\n# qdevolve program tree v1 main=x files=1\nno newline"
    tree = ProgramTree({"main.py": MAIN, "b/c.py": tricky, "empty.py": ""}, "main.py")
    code = dump_tree(tree)
    assert is_tree(code) and not is_tree(MAIN)
    back = parse_tree(code)
    assert back == tree and dump_tree(back) == code
    assert back.files["b/c.py"] == tricky


def test_round_trip_through_the_store(tmp_path: Path) -> None:
    with open_store(tmp_path / "run.sqlite", create=True) as store:
        run = store.create_run(name="t")
        prog = Program(code=dump_tree(_tree()), run_id=run)
        store.add_program(prog, EvalResult(status="ok", score=1.0))
        pid = prog.id
    with open_store(tmp_path / "run.sqlite") as store:
        got = store.get_program(pid)
    assert parse_tree(got.code) == _tree() and got.code_hash == prog.code_hash


def test_code_hash_covers_every_file_and_its_path() -> None:
    base = _parent().code_hash
    renamed = ProgramTree({"main.py": MAIN, "heuristic.py": HEUR, "util/fixed.py": FIXED}, "main.py")
    changed = _tree().replace("util/fixed.py", FIXED.replace("1", "2"))
    assert Program(code=dump_tree(renamed)).code_hash != base
    assert Program(code=dump_tree(changed)).code_hash != base
    spaced = _tree().replace("util/fixed.py", FIXED + "\n\n# a comment\n")  # normalised away, as one file
    assert Program(code=dump_tree(spaced)).code_hash == base


@pytest.mark.parametrize("path", ["../x.py", "/etc/passwd", "a/../../b.py", "a//b.py", "./a.py", ".hidden.py",
                                  "a\\b.py", "-rf.py", "a/b/c/d/e/f/g/h/i.py", "x y.py", "a\0.py", ""])
def test_bad_paths_are_refused_naming_the_path(path: str) -> None:
    with pytest.raises(TreeError, match="file path"):
        ProgramTree({"main.py": MAIN, path: "x = 1\n"}, "main.py")


def test_crafted_serialisations_are_refused() -> None:
    good = dump_tree(_tree())
    attacks = {
        "dotdot": good.replace("# --- file: heuristics.py", "# --- file: ../heuristics.py"),
        "length": good.replace(f"({len(HEUR)} chars)", f"({len(HEUR) + 5} chars)"),
        "count": good.replace("files=3", "files=2"),
        "unsorted": dump_tree(_tree()).replace("heuristics.py", "zzz.py"),
        "main missing": good.replace("main=main.py", "main=other.py"),
        "too many": good.replace("files=3", f"files={MAX_FILES + 1}"),
    }
    for name, code in attacks.items():
        with pytest.raises(TreeError):
            parse_tree(code)
        assert name
    with pytest.raises(TreeError, match="both a file and a directory"):
        ProgramTree({"main.py": MAIN, "util": "x", "util/fixed.py": FIXED}, "main.py")
    with pytest.raises(TreeError, match="over the limit"):
        ProgramTree({f"f{i}.py": "" for i in range(MAX_FILES + 1)}, "f0.py")


def test_seed_directory_refuses_symlinks_and_special_files(tmp_path: Path) -> None:
    d = tmp_path / "initial_program"
    d.mkdir()
    (d / "main.py").write_text(MAIN)
    (d / "heuristics.py").write_text(HEUR)
    assert read_tree_dir(d).main == "main.py"
    (d / "link.py").symlink_to("/etc/passwd")
    with pytest.raises(TreeError, match="link.py: is a symbolic link"):
        read_tree_dir(d)
    (d / "link.py").unlink()
    (d / "sub").symlink_to(tmp_path)
    with pytest.raises(TreeError, match="sub: is a symbolic link"):
        read_tree_dir(d)
    (d / "sub").unlink()
    os.mkfifo(d / "pipe.py")
    with pytest.raises(TreeError, match="not a regular file"):
        read_tree_dir(d)
    (d / "pipe.py").unlink()
    (d / ".env").write_text("SECRET=1\n")
    with pytest.raises(TreeError, match="'.env'"):
        read_tree_dir(d)


def test_example_with_a_program_directory_loads(tmp_path: Path) -> None:
    ex = load_example(EXAMPLE)
    tree = parse_tree(ex.seed_code)
    assert tree.main == "main.py" and set(tree.files) == {"main.py", "heuristics.py"}
    bad = tmp_path / "ex"
    (bad / "initial_program").mkdir(parents=True)
    (bad / "evaluator.py").write_text((EXAMPLE / "evaluator.py").read_text())
    (bad / "initial_program" / "main.py").write_text("def solve(xs):\n    return xs\n")
    with pytest.raises(EvaluationSetupError, match="no file of the program tree has EVOLVE-BLOCK"):
        load_example(bad)
    (bad / "initial_program" / "main.py").write_text("# EVOLVE-BLOCK-START\ndef solve(xs):\n  return xs(\n")
    with pytest.raises(EvaluationSetupError, match="main.py:.*syntax error"):
        load_example(bad)
    (bad / "initial_program" / "main.py").write_text("# EVOLVE-BLOCK-START\ndef solve(xs):\n  return xs\n")
    (bad / "initial_program.py").write_text("x = 1\n")
    with pytest.raises(EvaluationSetupError, match="a seed directory and a seed file"):
        load_example(bad)
    (bad / "initial_program.py").unlink()
    outside = tmp_path / "elsewhere"
    (bad / "initial_program").rename(outside)
    (bad / "initial_program").symlink_to(outside)
    with pytest.raises(EvaluationSetupError, match="symbolic link"):
        load_example(bad)


def test_diff_reply_edits_each_named_file() -> None:
    reply = ("Both files.\nFILE: heuristics.py\n<<<<<<< SEARCH\n    x = 3\n=======\n    x = 4\n>>>>>>> REPLACE\n"
             "FILE: main.py\n<<<<<<< SEARCH\nK = 2\n=======\nK = 5\n>>>>>>> REPLACE\n")
    code, meta = parse_tree_reply(DiffMutation().parse, reply, _parent(), [])
    child = parse_tree(code)
    assert child.files["heuristics.py"] == HEUR.replace("x = 3", "x = 4")
    assert child.files["main.py"] == MAIN.replace("K = 2", "K = 5")
    assert child.files["util/fixed.py"] == FIXED and sorted(meta["files"]) == ["heuristics.py", "main.py"]


def test_rewrite_reply_names_its_file() -> None:
    reply = "FILE: heuristics.py\n```python\n# EVOLVE-BLOCK-START\ndef h():\n    return 7\n# EVOLVE-BLOCK-END\n```\n"
    code, _ = parse_tree_reply(RewriteMutation().parse, reply, _parent(), [])
    assert "return 7" in parse_tree(code).files["heuristics.py"]


@pytest.mark.parametrize("reply, reason", [
    ("<<<<<<< SEARCH\n    x = 3\n=======\n    x = 4\n>>>>>>> REPLACE\n", "put a line 'FILE: <path>'"),
    ("FILE: nothere.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n", "'nothere.py', which is not in the program"),
    ("FILE: util/fixed.py\n<<<<<<< SEARCH\n    return 1\n=======\n    return 2\n>>>>>>> REPLACE\n",
     "util/fixed.py: has no EVOLVE-BLOCK markers"),
    ("FILE: main.py\n<<<<<<< SEARCH\nimport heuristics\n=======\nimport os\n>>>>>>> REPLACE\n",
     "main.py: edit outside the EVOLVE-BLOCK"),
    ("FILE: heuristics.py\n<<<<<<< SEARCH\n    x = 3\n=======\n    x = (\n>>>>>>> REPLACE\n", "heuristics.py: child does not parse"),
    ("FILE: main.py\n<<<<<<< SEARCH\nK = 2\n=======\nK = 3\n>>>>>>> REPLACE\n"
     "FILE: main.py\n<<<<<<< SEARCH\nK = 2\n=======\nK = 4\n>>>>>>> REPLACE\n", "named by two FILE: lines"),
])
def test_bad_tree_replies_are_invalid_with_the_file_named(reply: str, reason: str) -> None:
    from qdevolve.mutation._llm import ParseError

    with pytest.raises(ParseError) as exc:
        parse_tree_reply(DiffMutation().parse, reply, _parent(), [])
    assert reason in str(exc.value)


def test_engine_refuses_tree_children_that_touch_fixed_parts() -> None:
    parent = _parent()
    op = ASTMutation()

    def cand(tree_or_code: ProgramTree | str) -> Candidate:
        code = tree_or_code if isinstance(tree_or_code, str) else dump_tree(tree_or_code)
        return fixed_code_checked(parent, Candidate(code=code, operator="x", parent_ids=(parent.id,)), op)

    ok = cand(_tree().replace("heuristics.py", HEUR.replace("x = 3", "x = 9")))
    assert ok.code is not None
    assert "util/fixed.py: has no EVOLVE-BLOCK" in cand(_tree().replace("util/fixed.py", "x = 2\n")).error
    assert "outside the EVOLVE-BLOCK" in cand(_tree().replace("main.py", MAIN.replace("import heuristics",
                                                                                    "import os"))).error
    added = ProgramTree({**_tree().files, "extra.py": "x = 1\n"}, "main.py")
    assert "adds, removes or renames" in cand(added).error
    assert "not a well-formed tree" in cand("K = 1\n").error
    assert tree_violation(parent.code, parent.code) is None


def test_ast_mutator_changes_one_python_file_at_a_time() -> None:
    parent = _parent()
    cands = asyncio.run(ASTMutation().propose(parent, MutationContext(rng=np.random.default_rng(3), n=12)))
    touched = set()
    for c in cands:
        assert c.code is not None, c.error
        diff = [p for p, a, b in file_pairs(parent.code, c.code) if a != b]
        assert len(diff) == 1 and diff[0] in ("main.py", "heuristics.py")
        assert all(e.startswith(diff[0] + ": ") for e in c.metadata["edits"])
        touched.add(diff[0])
        assert tree_violation(parent.code, c.code) is None
    assert touched == {"main.py", "heuristics.py"}


def test_prompt_shows_each_file_and_asks_for_file_lines() -> None:
    user = build_prompt(_parent(), None, [], edit_format="diff")[1]["content"]
    for path in ("main.py", "heuristics.py", "util/fixed.py"):
        assert f"FILE: {path}" in user
    assert "(fixed: no EVOLVE-BLOCK)" in user and "only these may change: heuristics.py, main.py" in user
    assert "# qdevolve program tree" not in user
    single = build_prompt(Program(code=MAIN), None, [], edit_format="diff")[1]["content"]
    assert "FILE:" not in single


def test_novelty_features_read_the_whole_tree() -> None:
    from qdevolve.archive.features import ast_complexity, token_shingles

    code = _parent().code
    assert ast_complexity(code) == sum(ast_complexity(t) for t in (MAIN, HEUR, FIXED)) > 0
    other = dump_tree(_tree().replace("heuristics.py", HEUR.replace("x = 3", "y = x_other + 3")))
    assert token_shingles(code) != token_shingles(other)
    assert token_shingles(MAIN) <= token_shingles(code) and token_shingles(HEUR) <= token_shingles(code)
