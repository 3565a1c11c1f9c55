"""benchmarks/report.py --check: the repository's tables and figures match their raw files; an
edited table, a deleted raw file, an unknown renderer, a missing key or an edited plot series
makes it fail with a message naming the file, the block and the raw file; a fresh
regeneration passes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "benchmarks" / "report.py"
pytestmark = pytest.mark.slow  # subprocesses of report.py / torch imports: seconds each


def check(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPORT), "--root", str(root), *extra], capture_output=True, text=True,
                          timeout=240)


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of what report.py reads and writes: BENCHMARKS.md, README.md, benchmarks/results and the plots."""
    root = tmp_path_factory.mktemp("repo")
    for doc in ("BENCHMARKS.md", "README.md"):
        shutil.copy(ROOT / doc, root / doc)
    shutil.copytree(ROOT / "benchmarks" / "results", root / "benchmarks" / "results")
    for side in ROOT.glob("docs/*.plot.json"):
        (root / "docs").mkdir(exist_ok=True)
        shutil.copy(side, root / "docs" / side.name)
        png = side.with_name(side.name.replace(".plot.json", ".png"))
        if png.exists():
            shutil.copy(png, root / "docs" / png.name)
    return root


@pytest.fixture()
def repo(copy: Path, tmp_path: Path) -> Path:
    root = tmp_path / "r"
    shutil.copytree(copy, root)
    return root


def blocks(text: str) -> list[tuple[str, str, str]]:
    return re.findall(r"(?<!`)<!-- (report|figure):([\w.\-]+):([\w.\-]+) -->", text)  # as report.py: not in `code`


def test_the_repository_passes() -> None:
    r = subprocess.run([sys.executable, str(REPORT), "--check"], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert blocks((ROOT / "BENCHMARKS.md").read_text()) and blocks((ROOT / "README.md").read_text())


def test_an_edited_table_fails_and_regeneration_restores_it(repo: Path) -> None:
    doc = repo / "BENCHMARKS.md"
    text = doc.read_text()
    m = re.search(r"<!-- report:([\w.\-]+):([\w.\-]+) -->\n(\|[^\n]*\n)+", text)
    assert m is not None
    name, key = m.group(1), m.group(2)
    table = m.group(0)
    edited = re.sub(r"\d\.\d", lambda d: str((int(d.group(0)[0]) + 1) % 10) + d.group(0)[1:], table, count=1)
    assert edited != table
    doc.write_text(text.replace(table, edited, 1))
    r = check(repo, "--check")
    assert r.returncode == 1
    assert "BENCHMARKS.md" in r.stderr and f"report:{name}:{key}" in r.stderr
    assert f"benchmarks/results/{name}.json" in r.stderr and "+++" in r.stderr  # a diff
    assert check(repo).returncode == 0  # regenerate
    assert doc.read_text() == text
    assert check(repo, "--check").returncode == 0


def test_an_edited_readme_figure_fails(repo: Path) -> None:
    doc = repo / "README.md"
    text = doc.read_text()
    m = re.search(r"<!-- figure:([\w.\-]+):([\w.\-]+) -->(.*?)<!-- /figure -->", text, re.S)
    assert m is not None
    doc.write_text(text.replace(m.group(0), m.group(0).replace(m.group(3), m.group(3) + " (better)"), 1))
    r = check(repo, "--check")
    assert r.returncode == 1 and "README.md" in r.stderr and f"figure:{m.group(1)}:{m.group(2)}" in r.stderr


def test_a_deleted_raw_file_fails(repo: Path) -> None:
    name = blocks((repo / "BENCHMARKS.md").read_text())[0][1]
    (repo / "benchmarks" / "results" / f"{name}.json").unlink()
    r = check(repo, "--check")
    assert r.returncode == 1
    assert f"benchmarks/results/{name}.json is missing" in r.stderr and "BENCHMARKS.md" in r.stderr


def test_unknown_renderer_missing_key_and_unclosed_block_fail(repo: Path) -> None:
    doc = repo / "BENCHMARKS.md"
    text = doc.read_text()
    name = blocks(text)[0][1]
    doc.write_text(text + "\n<!-- report:no_such_bench:t -->\n| a |\n<!-- /report -->\n")
    r = check(repo, "--check")
    assert r.returncode == 1 and "unknown renderer 'no_such_bench'" in r.stderr
    doc.write_text(text + f"\n<!-- report:{name}:no_such_table -->\n| a |\n<!-- /report -->\n")
    r = check(repo, "--check")
    assert r.returncode == 1 and "has no key 'no_such_table'" in r.stderr and f"{name}.json" in r.stderr
    doc.write_text(text + f"\n<!-- report:{name}:meta -->\nnever closed\n")
    r = check(repo, "--check")
    assert r.returncode == 1 and "has no closing" in r.stderr


def test_plots_are_checked_by_their_series(repo: Path) -> None:
    sides = sorted(repo.rglob("*.plot.json"))
    if not sides:
        pytest.skip("no generated plot in this tree")
    side = sides[0]
    series = json.loads(side.read_text())
    side.write_text(json.dumps({**series, "edited": True}))
    r = check(repo, "--check")
    assert r.returncode == 1 and side.name in r.stderr
    assert check(repo).returncode == 0 and check(repo, "--check").returncode == 0
    assert json.loads(side.read_text()) == series
