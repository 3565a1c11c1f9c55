"""``memory_mb`` caps an evaluation's whole process tree, not each process (issue 19, item 4).

Six processes of 100 MiB each fit a per-process limit of 256 MiB but not a per-evaluation
one: the evaluation must end as ``memory`` on every backend where a memory cgroup is
available (docker always; local and bwrap, cold and warm, where the controller can write a
cgroup), and ``qdevolve sandbox check`` must say which enforcement is active.
"""

from __future__ import annotations

import pytest

from qdevolve.sandbox import SandboxLimits, _cgroup
from qdevolve.sandbox.attacks import ATTACKS, check_attack
from qdevolve.sandbox.isolation_attacks import MEMORY_TREE
from qdevolve.types import Program

from ._backends import CONFIGS, open_box

LIMITS = SandboxLimits(wall_s=20, cpu_s=10, memory_mb=256, processes=32)

TREE = MEMORY_TREE  # six processes of 100 MiB each, as in the catalogue
SMALL_TREE = (TREE.replace("range(6)", "range(2)").replace("100 << 20", "60 << 20")
              .replace("    os.waitpid(pid, 0)", "    assert os.waitpid(pid, 0)[1] == 0") + "print('children ok')\n")


@pytest.fixture(scope="module", params=CONFIGS)
def box(request):
    name, _warm = request.param
    if name != "docker" and _cgroup._root() is None:
        pytest.skip("no writable memory cgroup here: local/bwrap cap memory per process only")
    b = open_box(request, request.param)
    yield b
    b.close()


@pytest.mark.slow
def test_the_whole_tree_is_capped(box):
    r = box.evaluate(Program(code=TREE), None, LIMITS)
    assert r.status == "memory", (r.status, r.error, r.artifacts.get("stdout"))
    assert r.score is None


@pytest.mark.slow
def test_a_tree_within_the_cap_runs_and_the_next_evaluation_gets_the_whole_cap(box):
    for _ in range(2):  # warm: the cap is per job, not spent by the previous one
        r = box.evaluate(Program(code=SMALL_TREE), None, LIMITS)
        assert r.status == "ok", (r.error, r.artifacts)
        assert "children ok" in r.artifacts["stdout"]


@pytest.mark.slow
def test_catalogue_memory_tree_holds(box, host):
    row = check_attack(box, next(a for a in ATTACKS if a.name == "memory_tree"), host)
    assert row.passed, row.failures


@pytest.mark.slow
def test_no_cgroup_is_left_behind(box):
    box.evaluate(Program(code="print(1)"), None, LIMITS)
    root = _cgroup._root()
    if root is not None:
        left = [p.name for p in root.base.iterdir() if p.is_dir() and p.name.startswith("e-")]
        assert left == []


def test_enforcement_is_reported(monkeypatch):
    here = _cgroup.memory_enforcement()
    assert "cgroup" in here or "per process only" in here
    monkeypatch.setenv("QDEVOLVE_CGROUP", "off")
    _cgroup._root.cache_clear()
    try:
        assert _cgroup.memory_enforcement().startswith("per process only")
        assert _cgroup.new_cap(256) is None
    finally:
        monkeypatch.delenv("QDEVOLVE_CGROUP")
        _cgroup._root.cache_clear()
    assert _cgroup.backend_memory_enforcement("docker").startswith("docker")


@pytest.mark.slow
def test_sandbox_check_prints_the_enforcement():
    from click.testing import CliRunner

    from qdevolve.cli import cli

    out = CliRunner().invoke(cli, ["sandbox", "check", "--backend", "local", "--only", "cpu_loop"])
    assert "memory:  " in out.output and ("cgroup" in out.output or "per process only" in out.output)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_cap_files_of_both_cgroup_versions(tmp_path, version):
    """What a cap writes and reads, on a stand-in directory (a machine has one version)."""
    path = tmp_path / "e-0"
    path.mkdir()
    if version == "v2":
        for name in ("memory.max", "memory.swap.max", "memory.oom.group"):
            (path / name).write_text("max\n")
        (path / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n")
        (path / "memory.stat").write_text("anon 1000\nfile 5000\nshmem 24\n")
    else:
        (path / "memory.limit_in_bytes").write_text("9223372036854771712\n")
        (path / "memory.memsw.limit_in_bytes").write_text("9223372036854771712\n")
        (path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
        (path / "memory.stat").write_text("cache 5000\nrss 1000\nshmem 24\n")
    cap = _cgroup.MemoryCap(_cgroup._Root(version, tmp_path), path)
    cap.set_limit(256 << 20)
    assert cap.oom_kills() == 2 and cap.resident() == 1024
    assert cap.wrap(["x"])[-1] == "x" and cap.procs.endswith("cgroup.procs")
    if version == "v2":
        assert (path / "memory.max").read_text() == str(256 << 20)
        assert (path / "memory.swap.max").read_text() == "0" and (path / "memory.oom.group").read_text() == "1"
        cap.set_limit(1 << 30, group_kill=False)
        assert (path / "memory.oom.group").read_text() == "0"
    else:
        assert (path / "memory.limit_in_bytes").read_text() == str(256 << 20)
        assert (path / "memory.memsw.limit_in_bytes").read_text() == str(256 << 20)
