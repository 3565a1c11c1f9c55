"""The evaluator's directory travels with it: what is copied, the bounds, who may read it."""

from __future__ import annotations

import os
import stat

import pytest

from qdevolve.errors import EvaluationSetupError
from qdevolve.sandbox._evaldir import copy_dir, scan
from qdevolve.sandbox._staging import Staging


def _example(tmp_path):
    d = tmp_path / "ex"
    (d / "data").mkdir(parents=True)
    (d / "evaluator.py").write_text("def evaluate(p):\n    return {}\n")
    (d / "instances.json").write_text("[1, 2, 3]")
    (d / "data" / "deep.txt").write_text("deep")
    (d / "initial_program.py").write_text("x = 1\n")
    for skipped in ("__pycache__", ".git", "archives"):
        (d / skipped).mkdir()
        (d / skipped / "junk").write_text("junk")
    (d / "run.sqlite").write_text("db")
    (d / "run.sqlite-wal").write_text("db")
    (d / "link.txt").symlink_to("/etc/hostname")
    return d / "evaluator.py"


def test_scan_copies_data_and_skips_caches_databases_and_links(tmp_path):
    found = scan(_example(tmp_path))
    assert found.files == ("data/deep.txt", "evaluator.py", "initial_program.py", "instances.json")


@pytest.mark.parametrize("limit", ["files", "bytes"])
def test_scan_bounds_name_the_directory(tmp_path, limit):
    ev = _example(tmp_path)
    with pytest.raises(EvaluationSetupError, match=str(ev.parent)):
        if limit == "files":
            scan(ev, max_files=3)
        else:
            scan(ev, max_bytes=10)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_copy_is_the_runner_groups_only(tmp_path):
    found = scan(_example(tmp_path))
    dst = tmp_path / "copy"
    copy_dir(found, dst, group=61999)
    for path in [dst, dst / "data", dst / "evaluator.py", dst / "data" / "deep.txt"]:
        st = os.stat(path)
        assert (st.st_uid, st.st_gid) == (0, 61999)
        assert stat.S_IMODE(st.st_mode) == (0o750 if path.is_dir() else 0o640)
    assert (dst / "data" / "deep.txt").read_text() == "deep"


def test_staging_reuses_an_unchanged_copy_and_recopies_an_edited_one(tmp_path):
    ev = _example(tmp_path)
    staging = Staging(prefix="qdevolve-test-", eval_group=61999)
    try:
        first = staging.evaluator(ev)
        assert first.name == "evaluator.py" and (first.parent / "data" / "deep.txt").exists()
        assert staging.evaluator(ev) == first
        (ev.parent / "instances.json").write_text("[4]")
        second = staging.evaluator(ev)
        assert second != first and (second.parent / "instances.json").read_text() == "[4]"
    finally:
        staging.close()
