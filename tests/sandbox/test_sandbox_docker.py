"""Docker-specific behaviour: warm containers per worker thread, replacement after a
timeout, cleanup on close, and the evaluator protocol inside the image."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from qdevolve.sandbox import SandboxLimits
from qdevolve.types import Program

from .conftest import WRAPPERS, make_box

pytestmark = pytest.mark.docker
LIMITS = SandboxLimits(wall_s=3, cpu_s=1, memory_mb=256)


def _ours():
    import docker

    client = docker.from_env()
    try:
        return client.containers.list(all=True, filters={"label": f"qdevolve.owner={os.getpid()}"})
    finally:
        client.close()


@pytest.mark.slow
def test_warm_one_container_per_worker_and_cleanup(docker_image, tmp_path):
    ev = tmp_path / "evaluator.py"
    ev.write_text("import numpy\ndef evaluate(path):\n    src = open(path).read()\n"
                  "    return {'combined_score': len(src) / 100, 'tests': [1.0]}\n")
    box = make_box("docker", image=docker_image, warm=True)
    try:
        def one(i):
            return i, box.evaluate(Program(code=f"print({i})" + " " * i), ev, LIMITS)

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(one, range(12)))
        for i, r in results:
            assert r.status == "ok", r.error
            assert r.score == pytest.approx(len(f"print({i})" + " " * i) / 100)
        assert 1 <= len(box.containers()) <= 2
        # a timeout replaces that worker's container; the next evaluation still works
        slow = box.evaluate(Program(code="import time\ntime.sleep(60)"), None, LIMITS)
        assert slow.status == "timeout"
        again = box.evaluate(Program(code="print('again')"), None, LIMITS)
        assert again.status == "ok" and again.artifacts["stdout"] == "again\n"
        # leftovers of one evaluation are killed before the next one starts
        box.evaluate(Program(code="import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n"), None, LIMITS)
        ps = box.evaluate(Program(code="import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"),
                          None, LIMITS)
        assert ps.status == "ok"
        # tini, the idle process, this runner and its candidate process: nothing left from before
        assert len(eval(ps.artifacts["stdout"])) == 4
    finally:
        box.close()
    assert not _ours()


def test_fresh_container_is_removed(docker_image):
    box = make_box("docker", image=docker_image)
    try:
        r = box.evaluate(Program(code="import os\nprint(os.getuid(), os.path.exists('/root/.ssh'))"), None, LIMITS)
        assert r.status == "ok" and r.artifacts["stdout"] == "65532 False\n"  # the candidate uid
        assert box.containers() == []
    finally:
        box.close()
    assert not _ours()


@pytest.mark.slow
@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "warm"])
def test_docker_shm_tmp_and_work_dir_are_size_limited_and_forgeries_fail(docker_image, warm):
    from qdevolve.sandbox.attacks import ATTACKS, HostCanaries, check_attack

    limits = LIMITS.replace(tmpfs_mb=8, work_mb=8, file_size_bytes=4 << 20)
    # a warm container's tmpfs sizes are those of the sandbox's own limits
    box = make_box("docker", image=docker_image, warm=warm, limits=limits)
    try:
        for where in ("/dev/shm", "/tmp", "."):
            program = (f"import os\nn = 0\ntry:\n    for i in range(40):\n"
                       f"        with open(os.path.join({where!r}, f'f{{i}}'), 'wb') as fh:\n"
                       f"            fh.write(b'0' * (2 << 20))\n        n += 1\n"
                       f"except OSError as exc:\n    print('stopped', n, exc.errno)\n")
            r = box.evaluate(Program(code=program), None, limits)
            assert r.status == "ok", (where, r.error)
            assert r.artifacts["stdout"].startswith("stopped") and int(r.artifacts["stdout"].split()[1]) <= 4
        with HostCanaries() as host:
            for attack in (a for a in ATTACKS if a.honest is not None):
                row = check_attack(box, attack, host, wrappers=WRAPPERS)
                assert row.passed, (attack.name, row.got, row.failures)
    finally:
        box.close()
    assert not _ours()


_HOSTILE = """
import ctypes, os, signal
me = os.getuid()
procs = {}
for p in os.listdir('/proc'):
    if p.isdigit() and int(p) != os.getpid():
        try:
            uid = int(open(f'/proc/{p}/status').read().split('Uid:')[1].split()[0])
        except OSError:
            continue
        procs[int(p)] = uid
others = [p for p, uid in procs.items() if uid != me]
libc = ctypes.CDLL(None, use_errno=True)
traced = sum(libc.ptrace(16, p, 0, 0) == 0 for p in others)  # PTRACE_ATTACH
sent = 0
for p in others:
    for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM):
        try:
            os.kill(p, sig)
            sent += 1
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGKILL)  # everything this uid may signal: only this candidate
except OSError:
    pass
"""


@pytest.mark.slow
@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "warm"])
def test_candidate_cannot_signal_trace_or_rewrite(docker_image, warm):
    """The runner and the container's own processes run under other uids than the candidate:
    no signal or ptrace reaches them, and program.py is not the candidate's to change. The
    evaluator's record (here: the built-in evaluator's) still arrives."""
    box = make_box("docker", image=docker_image, warm=warm)
    try:
        probe = """
import os
uids = sorted({int(open(f'/proc/{p}/status').read().split('Uid:')[1].split()[0])
               for p in os.listdir('/proc') if p.isdigit()})
print(os.getuid(), uids)
for how in (lambda: open('program.py', 'w'), lambda: os.remove('program.py'), lambda: os.rename('program.py', 'x'),
            lambda: os.chmod('program.py', 0o666)):
    try:
        how()
        print('changed')
    except OSError:
        print('refused')
"""
        r = box.evaluate(Program(code=probe), None, LIMITS)
        assert r.status == "ok", r.error
        first, *rest = r.artifacts["stdout"].splitlines()
        me, uids = first.split(" ", 1)
        assert int(me) == 65532 and {65532, 65534}.issubset(eval(uids)), first  # candidate, runner
        assert rest == ["refused"] * 4
        # kill(-1) spares the caller: with nothing else under its uid, the run goes on
        r = box.evaluate(Program(code=_HOSTILE + "print('still here')\n"), None, LIMITS)
        assert r.status == "ok" and r.artifacts["stdout"] == "still here\n", (r.status, r.error)
        ok = box.evaluate(Program(code=_HOSTILE.replace("os.kill(-1, signal.SIGKILL)", "pass")
                                  + "print('sent', sent, 'traced', traced, 'others', len(others))\n"),
                          None, LIMITS)
        assert ok.status == "ok", ok.error
        sent_, traced_, others_ = (int(x) for x in ok.artifacts["stdout"].split()[1::2])
        assert others_ >= 2 and sent_ == 0 and traced_ == 0, ok.artifacts["stdout"]
    finally:
        box.close()
    assert not _ours()


@pytest.mark.slow
def test_flood_past_the_cpu_limit_leaves_a_failed_record(docker_image):
    """A stdout flood that spends the CPU budget: the runner (whose own CPU limit is the wall
    clock) still writes a record with the reason and the truncated output tail."""
    box = make_box("docker", image=docker_image)
    try:
        limits = SandboxLimits(wall_s=6, cpu_s=1, memory_mb=256, output_bytes=4096)
        # four processes (each with its own CPU limit) flood the runner's drain
        flood = ("import os\nfor _ in range(3):\n    if os.fork() == 0:\n        break\n"
                 "blob = b'x' * 65536\nwhile True:\n    os.write(1, blob)\n")
        r = box.evaluate(Program(code=flood), None, limits)
        assert r.status == "timeout", (r.status, r.error)
        assert "CPU" in r.error or "time limit" in r.error, r.error
        assert "stdout" in r.artifacts.get("truncated", ""), r.artifacts.keys()
        assert r.artifacts["stdout"].endswith("x" * 100)
    finally:
        box.close()


def test_warm_container_keeps_nothing_between_evaluations(docker_image):
    """What a candidate leaves in /tmp and its work dir (deep trees, a mode-000 directory,
    a file it made read-only) is gone before the next evaluation in the same container."""
    box = make_box("docker", image=docker_image, warm=True)
    try:
        plant = """
import os
for base in ('/tmp', '.'):
    d = os.path.join(base, 'deep')
    for i in range(300):
        d = os.path.join(d, 'd')
    os.makedirs(d)
    open(os.path.join(base, 'f'), 'w').write('x')
    os.chmod(os.path.join(base, 'f'), 0)
    os.makedirs(os.path.join(base, 'locked', 'inner'))
    os.chmod(os.path.join(base, 'locked'), 0)
print('planted')
"""
        look = "import os\nprint(sorted(os.listdir('/tmp')), sorted(os.listdir('.')))\n"
        r1 = box.evaluate(Program(code=plant), None, LIMITS)
        assert r1.status == "ok" and r1.artifacts["stdout"] == "planted\n", (r1.error, r1.artifacts)
        held = box.containers()
        r2 = box.evaluate(Program(code=look), None, LIMITS)
        assert r2.status == "ok", (r2.error, r2.artifacts)
        assert r2.artifacts["stdout"] == "[] ['program.py']\n"
        assert box.containers() == held  # the same warm container
    finally:
        box.close()


def test_warm_container_empties_what_the_evaluator_left(docker_image, tmp_path):
    """The evaluator (runner's uid) leaves a private tree in /tmp: it is removed before the
    next evaluation, in the same container."""
    ev = tmp_path / "evaluator.py"
    ev.write_text("import os\n\ndef evaluate(path):\n"
                  "    seen = sorted(os.listdir('/tmp'))\n"
                  "    os.makedirs('/tmp/evaluator_dir/inner', exist_ok=True)\n"
                  "    open('/tmp/evaluator_dir/inner/f', 'w').write('x')\n"
                  "    os.chmod('/tmp/evaluator_dir', 0o700)\n"
                  "    return {'combined_score': float(len(seen) == 0)}\n")
    box = make_box("docker", image=docker_image, warm=True)
    try:
        scores = [box.evaluate(Program(code="x = 1\n"), ev, LIMITS)]
        held = box.containers()
        scores += [box.evaluate(Program(code="x = 1\n"), ev, LIMITS) for _ in range(2)]
        assert [(r.status, r.score) for r in scores] == [("ok", 1.0)] * 3, [r.error for r in scores]
        assert box.containers() == held and len(held) == 1  # emptied, not replaced
    finally:
        box.close()
