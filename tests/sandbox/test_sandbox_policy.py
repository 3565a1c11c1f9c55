"""Policy as data: SandboxLimits, the rendered argv / rlimits / Docker kwargs, the classifier,
and the evaluator protocol's pure helpers. Nothing here starts a process."""

from __future__ import annotations

import math
import signal

import pytest

from qdevolve.sandbox import SandboxLimits, classify
from qdevolve.sandbox.limits import (
    render_bwrap_argv,
    render_bwrap_zygote_argv,
    render_docker_kwargs,
    render_env,
    render_local_argv,
    render_rlimits,
)
from qdevolve.sandbox.runner import ProtocolError, check_record, normalize_result
from qdevolve.sandbox.status import Outcome


def test_limits_defaults_and_validation():
    lim = SandboxLimits()
    assert (lim.wall_s, lim.cpu_s, lim.memory_mb, lim.processes) == (30.0, 30.0, 1024, 64)
    assert lim.network is False and lim.output_bytes == 1 << 20 and lim.file_size_bytes == 16 << 20
    with pytest.raises(ValueError, match="wall_s"):
        SandboxLimits(wall_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=-5)
    from dataclasses import FrozenInstanceError

    with pytest.raises(FrozenInstanceError):
        lim.wall_s = 3
    assert lim.replace(wall_s=2).wall_s == 2


def test_env_is_an_allowlist():
    lim = SandboxLimits(env_allow=("MY_OK",))
    env = render_env(lim, {"MY_OK": "1", "OPENAI_API_KEY": "sk-secret", "PATH": "/evil"})
    assert env["MY_OK"] == "1"
    assert "OPENAI_API_KEY" not in env
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin" and env["HOME"] == "/tmp"


def test_rlimits():
    rl = render_rlimits(SandboxLimits(cpu_s=2.5, memory_mb=256, processes=16, file_size_bytes=1000))
    assert rl["CPU"] == (3, 4)
    assert rl["AS"] == (256 << 20, 256 << 20)
    assert rl["NPROC"] == (16, 16) and rl["FSIZE"] == (1000, 1000) and rl["CORE"] == (0, 0)


def test_local_argv_as_root_unshares_and_drops_uid(tmp_path):
    argv = render_local_argv("/usr/bin/python3", "/r/runner.py", "/w/run.json", as_root=True,
                             limits=SandboxLimits())
    assert argv[0] == "unshare"
    for flag in ("--pid", "--fork", "--kill-child", "--mount-proc", "--net"):
        assert flag in argv
    assert argv[-5:] == ["/usr/bin/python3", "-I", "-S", "/r/runner.py", "/w/run.json"]
    net_on = render_local_argv("p", "r", "f", as_root=True, limits=SandboxLimits(network=True))
    assert "--net" not in net_on
    plain = render_local_argv("p", "r", "f", as_root=False, limits=SandboxLimits())
    assert plain == ["p", "-I", "-S", "r", "f"]
    # the uid drop: the runner builds its view of the host as root, then becomes the uid the
    # run file names (no capability survives the change from uid 0)
    import marshal

    from qdevolve.sandbox._staging import Staging
    from qdevolve.types import Program

    staging = Staging(prefix="qdevolve-policy-")
    try:
        run = staging.new_run(Program(code="x = 1"), uid=None, gid=None, inner_dir=None,
                              limits=SandboxLimits(work_mb=32), evaluator=None, cascade=None,
                              sys_path=[], view={"keep": ["/k"], "hide": ["/tmp"]})
        cfg = marshal.loads((run.path / ".qdevolve-run").read_bytes())
    finally:
        staging.close()
    assert cfg["view"] == {"keep": ["/k"], "hide": ["/tmp"]}
    assert cfg["work_mb"] == 32 and "drop_uid" in cfg


def test_bwrap_argv():
    argv = render_bwrap_argv("/usr/bin/python3.11", "/stage/runner", "/stage/work/run-1", uid=62001, gid=62001,
                             limits=SandboxLimits(tmpfs_mb=8), env={"PATH": "/usr/bin"},
                             ro_paths=["/opt/venv/site-packages"], evaluator="/stage/ev/abc/evaluator.py")
    assert argv[:2] == ["setpriv", "--reuid=62001"]
    b = argv.index("bwrap")
    body = argv[b:]
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in body
    assert "--share-net" not in body
    joined = " ".join(body)
    assert "--ro-bind /usr /usr" in joined
    assert "--ro-bind /opt/venv/site-packages /opt/venv/site-packages" in joined
    # the work dir is a size-limited tmpfs (the disk quota) with the program bound read-only
    assert f"--size {256 << 20} --tmpfs /qdevolve/work" in joined
    assert "--ro-bind /stage/work/run-1/program.py /qdevolve/work/program.py" in joined
    assert f"--size {8 << 20} --tmpfs /dev/shm" in joined
    assert "--as-pid-1" in body  # the trusted runner is the namespace's init
    assert "--ro-bind /stage/runner /qdevolve/runner" in joined
    assert "--ro-bind /stage/ev/abc/evaluator.py /qdevolve/evaluator/evaluator.py" in joined
    assert f"--size {8 << 20} --tmpfs /tmp" in joined
    assert "--setenv PATH /usr/bin" in joined
    assert body[-4:] == ["-I", "-S", "/qdevolve/runner/runner.py", "/qdevolve/work/.qdevolve-run"]
    # no host path is writable from inside
    assert body.count("--bind") == 0


def test_bwrap_warm_template_argv():
    """The warm template keeps only the capabilities to mount and switch uid, shares no user
    namespace trick, and sees the same read-only view as a cold run (walkable by the uid)."""
    argv = render_bwrap_zygote_argv("/usr/bin/python3.11", "/stage/runner", "/stage/evaluators",
                                    limits=SandboxLimits(tmpfs_mb=8), env={"PATH": "/usr/bin"},
                                    ro_paths=["/opt/venv/lib/site-packages"])
    assert argv[0] == "bwrap" and "setpriv" not in argv
    joined = " ".join(argv)
    assert ("--cap-drop ALL --cap-add CAP_SYS_ADMIN --cap-add CAP_SETUID --cap-add CAP_SETGID "
            "--cap-add CAP_KILL") in joined
    assert argv.count("--cap-add") == 4
    for flag in ("--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--die-with-parent",
                 "--new-session", "--as-pid-1", "--clearenv"):
        assert flag in argv
    assert "--unshare-user" not in joined and "--unshare-all" not in argv  # uids stay the host's
    assert "--ro-bind /stage/evaluators /qdevolve/evaluators" in joined
    assert "--ro-bind /opt/venv/lib/site-packages /opt/venv/lib/site-packages" in joined
    assert "--perms 0755 --dir /opt --perms 0755 --dir /opt/venv --perms 0755 --dir /opt/venv/lib" in joined
    assert "--perms 0755 --dir /qdevolve" in joined
    assert f"--size {8 << 20} --tmpfs /tmp" in joined and f"--size {8 << 20} --tmpfs /dev/shm" in joined
    assert argv.count("--bind") == 0
    assert argv[-3:] == ["-I", "-S", "/qdevolve/runner/zygote.py"]
    net = render_bwrap_zygote_argv("/usr/bin/python3.11", "/r", "/e", limits=SandboxLimits(network=True),
                                   env={}, ro_paths=[])
    assert "--unshare-net" not in net


def test_docker_kwargs():
    kw = render_docker_kwargs(SandboxLimits(memory_mb=300, processes=20), image="img", user="65534:65534",
                              env={"A": "1"}, mounts={"/h/work": ("/qdevolve/work", "rw"),
                                                      "/h/runner": ("/qdevolve/runner", "ro")})
    assert kw["network_mode"] == "none"
    assert kw["mem_limit"] == kw["memswap_limit"] == "300m"
    assert kw["pids_limit"] == 20 and kw["nano_cpus"] == 1_000_000_000
    assert kw["read_only"] is True and "/tmp" in kw["tmpfs"]
    assert kw["cap_drop"] == ["ALL"] and "cap_add" not in kw
    assert kw["security_opt"] == ["no-new-privileges:true"]
    assert kw["user"] == "65534:65534" and kw["init"] is True
    assert kw["log_config"]["type"] == "none"
    assert kw["environment"] == {"A": "1"}
    assert kw["volumes"]["/h/runner"] == {"bind": "/qdevolve/runner", "mode": "ro"}
    assert {u["name"] for u in kw["ulimits"]} == {"cpu", "fsize", "nofile", "core"}
    with pytest.raises(ValueError, match="root"):
        render_docker_kwargs(SandboxLimits(), image="i", user="0:0", env={}, mounts={})



def test_docker_kwargs_of_the_backend_and_the_cpu_split():
    """As the docker backend renders them: the container starts as root with SETUID, SETGID
    and KILL only (its idle command drops to the idle uid), the work dir is root's and
    sticky; the CPU ulimit is a backstop above the runner's own limit, which outlasts the
    wall clock while the candidate keeps ``cpu_s``."""
    from qdevolve.sandbox import _procctl
    from qdevolve.sandbox.docker_backend import RUNNER_CAPS

    limits = SandboxLimits(wall_s=20, cpu_s=2)
    kw = render_docker_kwargs(limits, image="img", user="65533:65533", env={}, mounts={},
                              work_owner=0, cap_add=RUNNER_CAPS, root_init=True)
    assert kw["user"] == "0:0" and kw["cap_drop"] == ["ALL"]
    assert sorted(kw["cap_add"]) == ["KILL", "SETGID", "SETUID"]
    assert "no-new-privileges:true" in kw["security_opt"]
    assert "uid=0,mode=1777" in kw["tmpfs"]["/qdevolve/work"]
    own, cand = _procctl.split_cpu(render_rlimits(limits), 19.0)
    assert cand == (2, 3) and own["CPU"][0] >= 20 and own["AS"] == render_rlimits(limits)["AS"]
    cpu = next(u for u in kw["ulimits"] if u["name"] == "cpu")
    assert cpu["soft"] > own["CPU"][0] and cpu["hard"] > own["CPU"][1]
    with pytest.raises(ValueError, match="root"):
        render_docker_kwargs(limits, image="i", user="0:0", env={}, mounts={}, root_init=True)


OK_RECORD = {"status": "ok", "score": 1.0, "metrics": {}, "features": {}, "artifacts": {}}


@pytest.mark.parametrize(
    "outcome, status",
    [
        (Outcome(exit_code=0, record=OK_RECORD), "ok"),
        (Outcome(exit_code=0, record={"status": "memory", "error": "MemoryError"}), "memory"),
        (Outcome(exit_code=0), "error"),  # clean exit, no record
        (Outcome(exit_code=3), "error"),
        (Outcome(exit_code=0, record_error="wrong nonce"), "invalid"),
        (Outcome(exit_code=-9, timed_out=True), "timeout"),
        (Outcome(exit_code=-signal.SIGXCPU), "timeout"),
        (Outcome(exit_code=128 + signal.SIGXCPU, shell_style=True), "timeout"),
        (Outcome(exit_code=137, shell_style=True, oom_killed=True), "memory"),
        (Outcome(exit_code=137, shell_style=True, cpu_s=1.0), "timeout"),  # no usage figure
        (Outcome(exit_code=137, shell_style=True, cpu_s=1.0, cpu_used_s=0.1), "killed"),
        (Outcome(exit_code=1, cpu_s=1.0, cpu_used_s=1.2), "timeout"),
        (Outcome(exit_code=-signal.SIGSEGV), "killed"),
        (Outcome(exit_code=137, shell_style=False), "error"),  # a plain exit(137)
        (Outcome(exit_code=1, stderr_tail="...\nMemoryError\n"), "memory"),
    ],
)
def test_classify(outcome, status):
    got, error = classify(outcome)
    assert got == status
    assert (error is None) == (status == "ok")


class _EvaluationResult:  # OpenEvolve's EvaluationResult shape
    def __init__(self, metrics, artifacts):
        self.metrics, self.artifacts = metrics, artifacts


def test_normalize_result_shapes():
    body = normalize_result({"combined_score": 0.7, "acc": 1, "tests": [0, 1.0], "features": {"n": 2},
                             "artifacts": {"log": 5}})
    assert body["score"] == 0.7 and body["metrics"] == {"acc": 1.0}
    assert body["tests"] == [0.0, 1.0] and body["features"] == {"n": 2.0} and body["artifacts"] == {"log": "5"}
    mean = normalize_result({"a": 1.0, "b": 0.0})
    assert mean["score"] == 0.5
    assert normalize_result({})["score"] is None
    obj = normalize_result(_EvaluationResult({"combined_score": 2.0}, {"stderr": "x"}))
    assert obj["score"] == 2.0 and obj["artifacts"] == {"stderr": "x"}
    err = normalize_result({"combined_score": 0.0, "error": "it broke\nbadly"})
    assert err["status"] == "error" and "it broke badly" in err["error"]


@pytest.mark.parametrize(
    "raw, match",
    [
        ({"combined_score": math.nan}, "not finite"),
        ({"combined_score": math.inf}, "not finite"),
        ({"x": "high"}, "not numeric"),
        ({"x": None}, "not numeric"),
        ({"tests": [0.5, 1.5]}, r"\[0, 1\]"),
        ({"features": {"d": math.nan}}, "not finite"),
        ({"artifacts": "text"}, "artifacts"),
        ([1, 2], "expected a dict"),
    ],
)
def test_normalize_result_rejects(raw, match):
    with pytest.raises(ProtocolError, match=match):
        normalize_result(raw)


def test_check_record_nonce_and_schema():
    good = {"nonce": "n1", **OK_RECORD}
    assert check_record(good, "n1") is good
    with pytest.raises(ProtocolError, match="nonce"):
        check_record(good, "n2")
    with pytest.raises(ProtocolError, match="status"):
        check_record({"nonce": "n1", "status": "great"}, "n1")
    with pytest.raises(ProtocolError):
        check_record({"nonce": "n1", "status": "ok", "metrics": {"x": "NaN"}}, "n1")


def test_runner_json_encoder_round_trips():
    import json

    from qdevolve.sandbox.runner import to_json

    tricky = ["quote\" back\\slash", "ctl\x00\x01\n\t\x1f", "uni é 漢字 🎉", b"\xff\xfe".decode("utf-8", "surrogateescape")]
    for s in tricky:
        assert json.loads(to_json(s)) == s
    record = {"nonce": "n", "score": 0.5, "metrics": {"a": 1}, "tests": [0.0, 1.0], "x": None, "ok": True,
              "bad": math.inf, 7: "int key"}
    assert json.loads(to_json(record)) == {"nonce": "n", "score": 0.5, "metrics": {"a": 1.0}, "tests": [0.0, 1.0],
                                           "x": None, "ok": True, "bad": "inf", "7": "int key"}


def test_limits_from_a_mapping_and_options_checked():
    from qdevolve import registry
    from qdevolve.errors import PluginError
    from qdevolve.sandbox.limits import as_limits

    lim = as_limits({"wall_s": 5, "env": {"PATH": "/usr/bin"}})
    assert lim.wall_s == 5 and lim.env == (("PATH", "/usr/bin"),)
    with pytest.raises(ValueError, match="unknown sandbox limit.*wal_s"):
        as_limits({"wal_s": 5})
    with pytest.raises(PluginError, match="unknown option.*bogus"):
        registry.sandbox.create({"type": "local", "bogus": 1})
