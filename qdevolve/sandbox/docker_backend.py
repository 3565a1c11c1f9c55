"""The ``docker`` sandbox (docker SDK): one hardened container per evaluation, or warm.

Policy (:func:`~qdevolve.sandbox.limits.render_docker_kwargs`): network ``none``, memory =
memory+swap, pids and CPU limits, read-only root with a tmpfs ``/tmp``, every capability
dropped but three (see below), ``no-new-privileges``, non-root uids, ``init`` (tini reaps orphans), logging
``none``. The container idles; each evaluation is one ``exec`` of the runner, whose output is
read (capped) from the exec stream on a reader thread while the calling thread keeps the wall
clock. Mounts: the runner and the evaluator copies read-only, a per-container slot directory
read-write (each evaluation gets a fresh sub-directory of it), the controller's
site-packages read-only.

The container starts as root with only ``SETUID``, ``SETGID`` and ``KILL`` in its bounding
set; tini stays pid 1, the idle sleeper drops to ``idle_user`` (65533) at once. Each
evaluation execs the runner as root with only ``CAP_SETUID``, ``CAP_SETGID`` and ``CAP_KILL``
in the container's bounding set (``no-new-privileges``): it copies the program into the
work dir (root's, mode 0444, sticky directory), starts the candidate under
``candidate_user`` (65532), then drops to ``user`` (65534) keeping only ``CAP_KILL`` (to stop
the candidate) and makes itself non-dumpable. The candidate thus cannot signal, trace or
read the runner, the idle processes or the program file.
``warm=True`` keeps one container per worker thread: the runner kills every process of the
candidate's and the runner's uids before and after each evaluation and, before it, empties
``/tmp``, ``/dev/shm`` and the work dir and removes every SysV IPC object and POSIX message
queue; a container that cannot be emptied, timed out, ran out of memory, produced no record
or stopped is removed and replaced, and so is one made for other limits (``_shape``). A warm
container has no container-wide CPU ulimit: each evaluation's runner sets its own.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from qdevolve import registry
from qdevolve.errors import EvaluationSetupError
from qdevolve.sandbox._bounded import Tail
from qdevolve.sandbox._proc import pid_alive
from qdevolve.sandbox._staging import Staging, remove_tree, site_packages
from qdevolve.sandbox.evaluator import build_result, parse_record
from qdevolve.sandbox.limits import (
    SANDBOX_ROOT,
    SandboxLimits,
    as_limits,
    render_docker_kwargs,
    render_env,
)
from qdevolve.sandbox.runner import MAX_RECORD_BYTES, RUN_FILE
from qdevolve.sandbox.status import Outcome
from qdevolve.types import EvalResult, Program

__all__ = ["DockerSandbox", "DEFAULT_IMAGE", "docker_available"]

EXEC_GRACE_S = 1.0  # docker exec start-up: the backstop kill waits this long past wall_s

DEFAULT_IMAGE = "qdevolve-sandbox:latest"
_IDLE = ("import os, sys, time\nuid, gid = map(int, sys.argv[1:3])\nos.setgroups([])\n"
         "os.setresgid(gid, gid, gid)\nos.setresuid(uid, uid, uid)\nwhile True: time.sleep(3600)\n")
_USER = 65534  # the runner once it dropped root
_IDLE_USER = 65533  # the container's own processes: a program running as _USER cannot signal them
_DIRTY = object()  # a warm container the runner could not empty (it exits 3 before evaluating)
_CANDIDATE_USER = 65532  # the candidate: another uid than the runner's
#: What the runner's exec keeps of root (see the module doc).
RUNNER_CAPS = ["SETUID", "SETGID", "KILL"]


def docker_available() -> str | None:
    """``None`` when a Docker engine answers, else the reason it does not."""
    try:
        import docker
    except ImportError:
        return "the docker SDK is not installed (pip install 'qdevolve[docker]')"
    try:
        client = docker.from_env(timeout=10)
        client.ping()
        client.close()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"
        return f"no Docker engine answers: {type(exc).__name__}: {exc}"
    return None


def _cgroup_value(cid: str, controller: str, file: str, key: str | None = None) -> float | None:
    """A counter from the container's cgroup (v1 cgroupfs or v2 systemd layouts)."""
    for base in (f"/sys/fs/cgroup/{controller}/docker/{cid}",
                 f"/sys/fs/cgroup/system.slice/docker-{cid}.scope", f"/sys/fs/cgroup/docker/{cid}"):
        try:
            text = Path(base, file).read_text()
        except OSError:
            continue
        if key is None:
            return float(text.split()[0])
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return float(parts[1])
    return None


def _shape(limits: SandboxLimits) -> tuple:
    """The limits a container is created with; a warm container serves only evaluations
    whose limits have the same shape (another ``memory_mb`` gets a new container)."""
    return (limits.memory_mb, limits.processes, limits.tmpfs_mb, limits.work_mb, limits.network,
            limits.file_size_bytes, limits.open_files)


class _Box:
    """One container with its host slot directory."""

    def __init__(self, container, slot: Path, shape: tuple = ()) -> None:
        self.container = container
        self.slot = slot
        self.shape = shape  # the container-wide limits it was made with (:func:`_shape`)

    def cpu_s(self) -> float | None:
        ns = _cgroup_value(self.container.id, "cpuacct", "cpuacct.usage")
        if ns is not None:
            return ns / 1e9
        us = _cgroup_value(self.container.id, "cpu", "cpu.stat", "usage_usec")
        return None if us is None else us / 1e6

    def ooms(self) -> float:
        v1 = _cgroup_value(self.container.id, "memory", "memory.oom_control", "oom_kill")
        if v1 is not None:
            return v1
        return _cgroup_value(self.container.id, "memory", "memory.events", "oom_kill") or 0.0


@registry.sandbox("docker")
class DockerSandbox:
    """Docker sandbox (see module doc).

    Args:
        limits: Default :class:`SandboxLimits`.
        image: Image built by ``sandboxes/docker/build-image.sh`` (or the Dockerfile).
        warm: Reuse one container per worker thread.
        python: Interpreter path inside the image (default: ``/usr/bin/pythonX.Y``).
        user: ``uid:gid`` the runner drops to; root is refused.
        candidate_user: ``uid:gid`` of the candidate process (differs from ``user``).
        idle_user: ``uid:gid`` of the container's idle process, which the program cannot
            signal, so ``kill(-1)`` cannot stop a warm container.
        runtime: OCI runtime (e.g. ``"runsc"`` for gVisor).
        inherit_site_packages: Mount the controller's site-packages read-only.
        extra_sys_path: Host directories mounted read-only and appended to ``sys.path``.
        base_url: Docker engine URL (default: the environment's).
    """

    name = "docker"

    def __init__(self, *, limits: SandboxLimits | None = None, image: str = DEFAULT_IMAGE,
                 warm: bool = False, python: str | None = None, user: str = f"{_USER}:{_USER}",
                 idle_user: str = f"{_IDLE_USER}:{_IDLE_USER}",
                 candidate_user: str = f"{_CANDIDATE_USER}:{_CANDIDATE_USER}",
                 runtime: str | None = None, inherit_site_packages: bool = True,
                 extra_sys_path: Sequence[str] = (), base_url: str | None = None) -> None:
        try:
            import docker
        except ImportError as exc:
            raise EvaluationSetupError("the docker sandbox needs the docker SDK: pip install 'qdevolve[docker]'") from exc
        import sys

        self._docker = docker
        try:
            self.client = docker.DockerClient(base_url=base_url, timeout=60) if base_url else docker.from_env(timeout=60)
            self.client.images.get(image)
        except docker.errors.ImageNotFound as exc:
            raise EvaluationSetupError(
                f"docker image {image} not found; build it with: bash sandboxes/docker/build-image.sh") from exc
        except Exception as exc:  # noqa: BLE001
            raise EvaluationSetupError(f"docker sandbox: no Docker engine answers ({exc}); start dockerd") from exc
        self.limits = as_limits(limits) or SandboxLimits()
        self.image = image
        self.warm = warm
        self.python = python or f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
        self.user = user
        self.idle_user = idle_user
        if len({u.split(":")[0] for u in (user, idle_user, candidate_user)}) != 3:
            raise EvaluationSetupError("docker sandbox: user, idle_user and candidate_user must differ")

        def pair(spec: str) -> tuple[int, int]:
            uid = int(spec.split(":")[0])
            return uid, int(spec.split(":")[1]) if ":" in spec else uid

        self.uid, self.gid = pair(user)
        self.users = {"runner": pair(user), "candidate": pair(candidate_user)}
        if 0 in (self.uid, self.users["candidate"][0]):
            raise EvaluationSetupError("docker sandbox: the runner and the candidate never keep uid 0")
        self.runtime = runtime
        self.sys_path = list(extra_sys_path) + (site_packages() if inherit_site_packages else [])
        # Mounted beneath the sandbox root, never at their host paths: a host path under /tmp
        # would sit beneath the container's own tmpfs /tmp (hidden, and wiped between evaluations)
        self.inner_sys_path = [f"{SANDBOX_ROOT}/lib/{i}" for i in range(len(self.sys_path))]
        self.staging = Staging(prefix="qdevolve-docker-", eval_group=self.users["runner"][1])
        self._lock = threading.Lock()
        self._warm: dict[int, _Box] = {}
        self._all: set[str] = set()
        self._closed = False
        self.tag = uuid.uuid4().hex[:8]
        if base_url is None:
            self._remove_orphans()

    def _remove_orphans(self) -> None:
        """Remove sandbox containers whose controller (on this host) died without close()."""
        try:
            stale = self.client.containers.list(all=True, filters={"label": "qdevolve.sandbox=1"})
        except Exception:  # noqa: BLE001
            return
        for c in stale:
            owner = (c.labels or {}).get("qdevolve.owner", "")
            if owner.isdigit() and int(owner) != os.getpid() and not pid_alive(int(owner)):
                try:
                    c.remove(force=True)
                except Exception:  # noqa: BLE001
                    pass

    # -- containers -----------------------------------------------------------------------
    def _start_box(self, limits: SandboxLimits) -> _Box:
        slot = Path(self.staging.work_root, f"slot-{uuid.uuid4().hex[:12]}")
        slot.mkdir(mode=0o700)  # root's: only the runner, before it drops root, reads it
        mounts = {
            str(self.staging.runner_dir): (f"{SANDBOX_ROOT}/runner", "ro"),
            str(self.staging.eval_dir): (f"{SANDBOX_ROOT}/evaluators", "ro"),
            str(slot): (f"{SANDBOX_ROOT}/in", "ro"),
        }
        for p, inner in zip(self.sys_path, self.inner_sys_path, strict=True):
            mounts[p] = (inner, "ro")
        kwargs = render_docker_kwargs(
            limits, image=self.image, user=self.idle_user, env=render_env(limits), mounts=mounts,
            name=f"qdevolve-sbx-{self.tag}-{uuid.uuid4().hex[:8]}",
            command=[self.python, "-I", "-S", "-c", _IDLE, *self.idle_user.split(":")[:2]],
            runtime=self.runtime, work_owner=0, cap_add=RUNNER_CAPS, root_init=True,
            cpu_backstop=not self.warm,  # a warm container serves any cpu_s (issue 19: > 34 s failed)
        )
        kwargs["labels"]["qdevolve.owner"] = str(os.getpid())
        container = self.client.containers.create(**kwargs)
        with self._lock:
            self._all.add(container.id)
        try:
            container.start()
            return _Box(container, slot, _shape(limits))
        except BaseException:
            self._remove(container, slot)
            raise

    def _remove(self, container, slot: Path | None) -> None:
        try:
            container.remove(force=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        with self._lock:
            self._all.discard(container.id)
        if slot is not None:
            remove_tree(slot)

    def _box(self, limits: SandboxLimits) -> _Box:
        if not self.warm:
            return self._start_box(limits)
        key = threading.get_ident()
        with self._lock:
            box = self._warm.get(key)
        if box is not None and box.shape != _shape(limits):  # made for other limits
            self._discard(box)
            box = None
        if box is None:
            box = self._start_box(limits)
            with self._lock:
                self._warm[key] = box
        return box

    def _discard(self, box: _Box) -> None:
        with self._lock:
            for k, v in list(self._warm.items()):
                if v is box:
                    del self._warm[k]
        self._remove(box.container, box.slot)

    # -- evaluation -----------------------------------------------------------------------
    def evaluate(self, program: Program, evaluator: str | Path | None = None,
                 limits: SandboxLimits | None = None, *,
                 cascade_thresholds: Sequence[float] | None = None) -> EvalResult:
        """Evaluate ``program`` in a container; thread-safe; never raises for the program.

        A program tree is staged whole: the runner copies each of its files into the
        container's work directory at its relative path (``tree_files`` in the run file)."""
        result = self._evaluate(program, evaluator, limits, cascade_thresholds)
        if result is _DIRTY:  # an earlier candidate left what could not be removed: new container
            result = self._evaluate(program, evaluator, limits, cascade_thresholds)
        return EvalResult(status="error", error="docker sandbox: no clean container") if result is _DIRTY else result

    def _evaluate(self, program, evaluator, limits, cascade_thresholds):
        if self._closed:
            raise RuntimeError("docker sandbox is closed")
        limits = as_limits(limits) or self.limits
        ev = self.staging.evaluator(evaluator)
        start = time.monotonic()
        try:
            box = self._box(limits)
            if self.warm:
                box.container.reload()
                if box.container.status != "running":  # died since its last evaluation
                    self._discard(box)
                    box = self._box(limits)
        except Exception as exc:  # noqa: BLE001 - engine trouble, not the program's doing
            return EvalResult(status="error", error=f"docker sandbox failed to start a container: {exc}",
                              runtime_s=time.monotonic() - start)
        keep = True
        run = None
        try:
            run = self.staging.new_run(
                program, uid=None, gid=None, inner_dir=f"{SANDBOX_ROOT}/in/{{name}}", users=self.users,
                limits=limits,
                evaluator=None if ev is None else f"{SANDBOX_ROOT}/evaluators/{ev.parent.name}/{ev.name}",
                cascade=None if cascade_thresholds is None else [float(t) for t in cascade_thresholds],
                sys_path=self.inner_sys_path, reap_keep=[], parent=box.slot, work_dir=f"{SANDBOX_ROOT}/work",
            )
            inner = f"{SANDBOX_ROOT}/in/{run.path.name}"
            ooms0, cpu0 = box.ooms(), box.cpu_s()
            code, timed_out, out, err, truncated = self._exec(
                box, [self.python, "-I", "-S", f"{SANDBOX_ROOT}/runner/runner.py", f"{inner}/{RUN_FILE}"],
                f"{SANDBOX_ROOT}/work", limits)
            oom = box.ooms() > ooms0
            cpu1 = box.cpu_s()
            if self.warm and code == 3 and "could not be emptied" in err:
                keep = False
                return _DIRTY
            record, why = parse_record(out, run.nonce, clean_exit=code == 0 and not timed_out)
            outcome = Outcome(
                exit_code=code, shell_style=True, timed_out=timed_out, oom_killed=oom,
                record=record, record_error=why, record_missing=record is None and why is None,
                cpu_s=limits.cpu_s, cpu_used_s=None if cpu0 is None or cpu1 is None else cpu1 - cpu0,
                stderr_tail=err,
            )
            keep = record is not None and not timed_out and not oom
            return build_result(outcome, runtime_s=time.monotonic() - start, stdout="", stderr=err,
                                truncated=[k for k in truncated if k != "stdout"],
                                artifacts_bytes=limits.artifacts_bytes)
        except Exception as exc:  # noqa: BLE001
            keep = False
            return EvalResult(status="error", error=f"docker sandbox failed: {type(exc).__name__}: {exc}",
                              runtime_s=time.monotonic() - start)
        finally:
            if run is not None:
                self.staging.remove_run(run)
            if not self.warm or not keep:
                self._discard(box)

    def _exec(self, box: _Box, cmd: list[str], workdir: str, limits: SandboxLimits):
        api = self.client.api
        exec_id = api.exec_create(box.container.id, cmd, stdout=True, stderr=True, stdin=False,
                                  tty=False, user="0:0", workdir=workdir,
                                  environment=render_env(limits, sys_path=self.inner_sys_path))["Id"]
        caps = {"stdout": MAX_RECORD_BYTES + 1, "stderr": limits.output_bytes}
        tails = {k: Tail(c) for k, c in caps.items()}
        lost: list[str] = []
        start = time.monotonic()

        def pump() -> None:
            try:
                for out, err in api.exec_start(exec_id, stream=True, demux=True):
                    if out:
                        tails["stdout"].add(out)
                    if err:
                        tails["stderr"].add(err)
            except Exception as exc:  # noqa: BLE001 - stream broken or container removed
                lost.append(f"{type(exc).__name__}: {exc}")

        reader = threading.Thread(target=pump, daemon=True, name="qdevolve-docker-reader")
        reader.start()
        # The runner inside stops its candidate a little before ``wall_s`` and still writes its
        # record; the hard kill here is the backstop, later by the exec start-up time.
        hard_s = limits.wall_s + EXEC_GRACE_S
        reader.join(hard_s)
        deadline = start + hard_s
        info = api.exec_inspect(exec_id)
        while info.get("Running") and time.monotonic() < deadline:  # the stream ended early
            time.sleep(0.05)
            info = api.exec_inspect(exec_id)
        timed_out = reader.is_alive() or bool(info.get("Running"))
        code = None
        if timed_out:
            try:
                box.container.kill()
            except Exception:  # noqa: BLE001
                pass
            reader.join(10)
        else:
            code = info.get("ExitCode")
        if lost:
            tails["stderr"].add(f"\n[qdevolve: exec output stream lost: {lost[0]}]\n".encode())
        truncated = [k for k, t in tails.items() if t.total > caps[k]]
        return code, timed_out, tails["stdout"].text(), tails["stderr"].text(), truncated

    def containers(self) -> list[str]:
        """Ids of the containers this sandbox currently holds."""
        with self._lock:
            return sorted(self._all)

    def close(self) -> None:
        """Remove every container and the staging directory."""
        self._closed = True
        with self._lock:
            boxes = list(self._warm.values())
            self._warm.clear()
            ids = list(self._all)
        for box in boxes:
            self._remove(box.container, box.slot)
        for cid in ids:
            try:
                self.client.api.remove_container(cid, force=True)
            except Exception:  # noqa: BLE001
                pass
        self._all.clear()
        self.staging.close()
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
