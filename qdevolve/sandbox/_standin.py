"""The runner's side of the candidate process: spawn it, call into it, stand in for it.

Stdlib only (staged next to ``runner.py``). The evaluator never executes candidate code:
when it imports the program (``spec_from_file_location(...).loader.exec_module``,
``__import__`` through ``sys.path``, ``runpy.run_path``, ``exec``/``compile`` of the
program's text) it gets a *stand-in*: a module whose attributes are fetched from the
candidate process and whose functions run there. Everything the candidate sends is plain
data built afresh here (:data:`_wire.PLAIN_TYPES`; numpy arrays as dtype, shape and copied
bytes), converted in the candidate's own process, or a function of the candidate that the
evaluator can only call (:class:`_Remote`): no proxy forwards ``len``, iteration, indexing,
``in``, attribute reads or ``__array_interface__`` to candidate code. Any other value fails
the call with a ``TypeError`` naming its type. The evaluator's own objects cross to the
candidate as handles; the candidate may call back only what the evaluator handed it (a
function, or public methods of an object such as ``random.Random``).

Each top-level call has a deadline (``call_s``, default: the run's wall clock). When the
candidate dies, times out or breaks the protocol, it is killed and the evaluator's call
raises :class:`CandidateDied` (or :class:`CandidateTimeout`); the runner records the
candidate's fate (``timeout``, ``memory``, ``killed``) when the evaluator does not recover.
"""

from __future__ import annotations

import builtins
import os
import signal
import socket
import sys
import time
import types

import _codeorigin
import _wire


class Drain:
    """The pipe behind fd 1 of the runner, the evaluator and the candidate: its last
    ``cap`` bytes are kept, the rest counted (fd 1 itself is the record channel's place)."""

    def __init__(self, cap: int) -> None:
        import threading

        self.cap, self.buf, self.total = cap, bytearray(), 0
        self.read_fd, write_fd = os.pipe()
        os.dup2(write_fd, 1)
        os.close(write_fd)
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        while True:
            try:
                chunk = os.read(self.read_fd, 65536)
            except InterruptedError:
                continue
            except OSError:
                return
            if not chunk:
                return
            self.total += len(chunk)
            self.buf += chunk
            if len(self.buf) > 2 * self.cap:
                del self.buf[: len(self.buf) - self.cap]

    def finish(self) -> tuple:
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - the evaluator may have replaced sys.stdout
            pass
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        self.thread.join(0.2)  # orphans of the candidate may keep the pipe open: do not wait
        return bytes(self.buf[-self.cap:]).decode("utf-8", "replace"), self.total > self.cap


class CandidateDied(RuntimeError):
    """The candidate process is gone (exit, signal, closed channel or protocol breach)."""


class CandidateTimeout(CandidateDied, TimeoutError):
    """A call into the candidate did not return within its deadline."""


class CandidateError(Exception):
    """An exception of the candidate whose type is not a builtin exception."""


_NO_REMAP = {"KeyboardInterrupt", "GeneratorExit", "BaseException", "BaseExceptionGroup"}


def _local_exception(err: _wire.RemoteError) -> BaseException:
    """The candidate's exception as a builtin of the same name where one exists."""
    cls = getattr(builtins, err.type_name, None)
    exc: BaseException
    if (isinstance(cls, type) and issubclass(cls, BaseException) and err.type_name not in _NO_REMAP):
        try:
            exc = cls(int(err.remote_message) if cls is SystemExit and err.remote_message.isdigit()
                      else err.remote_message)
        except Exception:  # noqa: BLE001 - constructors that want other arguments
            exc = CandidateError(str(err))
    else:
        exc = CandidateError(str(err))
    exc.remote_traceback = err.remote_traceback  # type: ignore[attr-defined]
    return exc


class Candidate:
    """One candidate process (started on first use) and the fate it met."""

    def __init__(self, python: str, script: str, sys_path: list, call_s: float, cpu_s: float,
                 run_s: float = 1e9, *, fork_only: bool = False, cpu_rlimit: tuple | None = None,
                 user: tuple | None = None) -> None:
        self.python, self.script, self.sys_path = python, script, sys_path
        # cpu_rlimit: the candidate's RLIMIT_CPU (the runner's own is the wall clock, so that
        # it outlives a candidate that makes it drain a flood); user: (uid, gid) the candidate
        # switches to (docker: the runner keeps a uid of its own)
        self.cpu_rlimit, self.user = cpu_rlimit, user
        # fork_only: the warm path forks the candidate from a clean, pre-imported process
        # (before any secret is read) instead of starting a new interpreter
        self.fork_only = fork_only
        self.call_s, self.cpu_s = call_s, cpu_s
        self.run_end = time.monotonic() + run_s  # no call outlives the run
        self.pid: int | None = None
        self.endpoint: _wire.Endpoint | None = None
        self.fate: tuple | None = None  # (status, reason) once it died abnormally
        self.rusage = None

    def start(self) -> _wire.Endpoint:
        if self.endpoint is not None:
            if self.endpoint.closed:
                raise CandidateDied(self.fate[1] if self.fate else "the candidate process is gone")
            return self.endpoint
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # child: keep only stdin, stdout (the drained pipe), stderr and the channel
            try:
                os.setsid()
                devnull = os.open(os.devnull, os.O_RDONLY)
                os.dup2(devnull, 0)  # never the runner's stdin (the nonce may arrive there)
                os.dup2(theirs.fileno(), 3)
                os.set_inheritable(3, True)
                os.closerange(4, 1 << 16)
                if self.cpu_rlimit is not None:
                    import resource

                    soft, hard = self.cpu_rlimit
                    cur_hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
                    if cur_hard != resource.RLIM_INFINITY:  # never above what this process holds
                        hard = min(hard, cur_hard)
                        soft = min(soft, hard)
                    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
                if self.user is not None:
                    os.setgroups([])
                    os.setresgid(self.user[1], self.user[1], self.user[1])
                    os.setresuid(self.user[0], self.user[0], self.user[0])
                if self.fork_only:
                    import candidate

                    candidate.main(["candidate.py", "3", *self.sys_path])
                os.execv(self.python, [self.python, "-I", "-S", self.script, "3", *self.sys_path])
            finally:
                os._exit(127)
        theirs.close()
        self.pid = pid
        self.endpoint = _wire.Endpoint(ours, "e", _Remote, _evaluator_policy)
        return self.endpoint

    def request(self, *msg: object) -> object:
        """A request with the per-call deadline; failures kill the candidate. What it
        returns is the candidate's: the runner is tainted from here on (``_codeorigin``)."""
        _codeorigin.taint("a reply from the candidate process")
        endpoint = self.start()
        outer = endpoint.deadline
        endpoint.deadline = min(time.monotonic() + self.call_s, self.run_end)
        try:
            return endpoint.request(*msg)
        except _wire.RemoteError as err:
            raise _local_exception(err) from None
        except _wire.Timeout:
            self.kill(("timeout", "a call into the candidate ran into the time limit "
                                  f"(per call {self.call_s:g} s, the run's wall clock)"))
            raise CandidateTimeout(self.fate[1]) from None
        except (_wire.WireError, OSError) as exc:
            why = None if isinstance(exc, _wire.Closed) else f"the candidate broke the channel protocol ({exc})"
            self.kill(None if why is None else ("error", why))
            raise (CandidateTimeout if self.fate[0] == "timeout" else CandidateDied)(self.fate[1]) from None
        finally:
            endpoint.deadline = outer

    def kill(self, fate: tuple | None) -> None:
        """Kill the candidate's process group, reap it and record how it ended."""
        if self.endpoint is not None:
            self.endpoint.closed = True
            try:
                self.endpoint.sock.close()
            except OSError:
                pass
        if self.pid is None:
            return
        alive = True
        for _ in range(200):  # a candidate that closed its channel is usually already exiting
            pid, status, ru = os.wait4(self.pid, os.WNOHANG)
            if pid:
                alive = False
                break
            if fate is not None:
                break
            time.sleep(0.001)
        if alive:
            for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
                try:
                    target()
                except OSError:
                    pass
            _, status, ru = os.wait4(self.pid, 0)
        else:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                pass
        self.pid = None
        self.rusage = ru
        if fate is None:
            fate = self._fate(status, ru)
        self.fate = self.fate or fate

    def _fate(self, status: int, ru) -> tuple:
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            used = ru.ru_utime + ru.ru_stime
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and used >= self.cpu_s - 0.05):
                return "timeout", f"the candidate reached the CPU-time limit ({used:.1f} s)"
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            return "killed", f"the candidate process was killed by {name}"
        code = os.WEXITSTATUS(status)
        return "error", f"the candidate process exited (status {code}) before returning"

    def close(self) -> None:
        if self.pid is not None:
            self.kill(("error", "closed"))


def _evaluator_policy(op: str, target: object, name: object) -> None:
    """What the candidate may ask of the evaluator: call what it was handed, or a public
    method of it. No attribute reads or writes, no imports."""
    if op != "call" or (name is not None and (not isinstance(name, str) or name.startswith("_"))):
        raise PermissionError(f"the candidate may not {op} {name!r} on an evaluator object")


CANDIDATE: Candidate | None = None  # set by the runner before the evaluator is imported


class _Remote:
    """A function of the candidate process: the evaluator may call it, nothing else.

    Its results are plain data (converted in the candidate's process); it forwards no
    attribute read, no ``len``/``iter``/``in``/indexing and no protocol of numpy's."""

    __slots__ = ("_h",)

    def __init__(self, endpoint: _wire.Endpoint, handle: _wire.Handle) -> None:
        object.__setattr__(self, "_h", handle)

    def __call__(self, *args, **kwargs):
        return CANDIDATE.request("call", self._h, None, args, kwargs)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a candidate function has no attribute {name!r} to set")

    def __repr__(self) -> str:
        return f"<candidate function #{self._h.oid}>"


class _RemoteModule:
    """The program's module in the candidate process (what ``load`` returned): attribute
    reads give plain data or a callable :class:`_Remote`; writes send the value there."""

    __slots__ = ("_h",)

    def __init__(self, remote: _Remote) -> None:
        self._h = object.__getattribute__(remote, "_h")

    def get(self, name: str):
        return CANDIDATE.request("getattr", self._h, name)

    def set(self, name: str, value: object) -> None:
        CANDIDATE.request("setattr", self._h, name, value)

    def names(self) -> list:
        return CANDIDATE.request("dir", self._h)

    def namespace(self) -> dict:
        return CANDIDATE.request("vars", self._h)


_LOCAL = frozenset({"__class__", "__dict__", "__spec__", "__loader__", "__name__", "__file__",
                    "__path__", "__package__", "__cached__", "__builtins__", "_qdevolve_remote"})


class StandInModule(types.ModuleType):
    """The module the evaluator sees: attribute reads and writes go to the candidate's module."""

    def __getattribute__(self, name: str):
        if name in _LOCAL:
            return object.__getattribute__(self, name)
        remote = object.__getattribute__(self, "__dict__").get("_qdevolve_remote")
        return remote.get(name)

    def __setattr__(self, name: str, value: object) -> None:
        if name in _LOCAL:
            object.__setattr__(self, name, value)
        else:
            object.__getattribute__(self, "__dict__")["_qdevolve_remote"].set(name, value)

    def __dir__(self):
        return object.__getattribute__(self, "__dict__")["_qdevolve_remote"].names()


def load(name: str, path: str, run_name: str | None = None, source: object = None) -> _RemoteModule:
    """Execute the program (or ``source``, compiled as ``path``) in the candidate process;
    its module, as seen from here."""
    remote = CANDIDATE.request("load", name, path, run_name or name, source)
    if type(remote) is not _Remote:
        raise CandidateError("the candidate process did not return its module")
    return _RemoteModule(remote)


class RemoteCode:
    """What ``compile`` gives for text the runner may not run (``_codeorigin``): ``exec`` of
    it runs the text in the candidate's process; anything else refuses it (it is no code)."""

    __slots__ = ("source", "filename")

    def __init__(self, source: object, filename: object) -> None:
        self.source, self.filename = source, filename

    def __repr__(self) -> str:
        return f"<code of the candidate {self.filename!r}: runs only in the candidate process>"


_ONLY_AST = 0x400


def install() -> None:
    """Make every way an evaluator imports or executes the candidate's bytes run them in the
    candidate process (the program, any file the candidate could have written, text built
    from them): which ones is ``_codeorigin``'s rule of where bytes came from."""
    from importlib import _bootstrap_external

    mine = _codeorigin.candidates_path

    base = _bootstrap_external._LoaderBasics
    original_exec_module = base.exec_module

    def exec_module(self, module):
        path = getattr(self, "path", None)
        if not isinstance(path, (str, os.PathLike)) or not mine(path):
            return original_exec_module(self, module)
        remote = load(module.__name__, os.path.realpath(path))
        module.__dict__["_qdevolve_remote"] = remote
        module.__class__ = StandInModule
        return None

    base.exec_module = exec_module
    ext = _bootstrap_external.ExtensionFileLoader
    original_create = ext.create_module

    def create_module(self, spec):
        if mine(getattr(self, "path", None) or ""):
            raise _codeorigin.CodeOriginError(f"the trusted runner loads no extension module the candidate "
                                              f"could have written ({self.path!r})")
        return original_create(self, spec)

    ext.create_module = create_module

    import runpy

    original_run_path = runpy.run_path

    def run_path(path_name, init_globals=None, run_name=None):
        if not mine(path_name):
            return original_run_path(path_name, init_globals, run_name)
        remote = load(run_name or "<run_path>", os.path.realpath(path_name), run_name or "<run_path>")
        return remote.namespace()

    runpy.run_path = run_path

    original_compile, original_exec = builtins.compile, builtins.exec

    def runs_here(src) -> bool:
        return _codeorigin.trusted_source(src, _codeorigin._caller(sys._getframe(2)))

    def compile_(src, filename, mode, flags=0, *args, **kwargs):
        if isinstance(flags, int) and flags & _ONLY_AST:
            return _codeorigin.ast_only(original_compile, src, filename, mode, flags, *args, **kwargs)
        if mode == "exec" and isinstance(src, (str, bytes, bytearray)) and not runs_here(src):
            return RemoteCode(src, filename)
        if mode == "exec" and not isinstance(src, (str, bytes, bytearray)) and _is_ast(src) and not runs_here(src):
            import ast

            return RemoteCode(ast.unparse(src), filename)
        return original_compile(src, filename, mode, flags, *args, **kwargs)

    def exec_(obj, globals_=None, locals_=None, /, *args, **kwargs):
        remote_code = type(obj) is RemoteCode
        if not remote_code and not (isinstance(obj, (str, bytes, bytearray)) and not runs_here(obj)):
            frame_globals = sys._getframe(1).f_globals if globals_ is None else globals_
            if locals_ is None and globals_ is None:
                locals_ = sys._getframe(1).f_locals
            return original_exec(obj, frame_globals, locals_, *args, **kwargs)
        source, filename = (obj.source, obj.filename) if remote_code else (obj, "<string>")
        if isinstance(source, (bytes, bytearray)):
            source = bytes(source)
        target = globals_ if globals_ is not None else sys._getframe(1).f_globals
        # like exec: code run in globals without __name__ sees the builtins module's name
        name = target.get("__name__", "builtins") if isinstance(target, dict) else "builtins"
        if not isinstance(filename, str):
            filename = os.fsdecode(filename) if isinstance(filename, (bytes, os.PathLike)) else "<string>"
        remote = load(str(name), filename, str(name), source)
        names = remote.namespace()
        (locals_ if locals_ is not None else target).update(
            {k: v for k, v in names.items() if k != "__builtins__"})
        return None

    builtins.compile, builtins.exec = compile_, exec_


def _is_ast(obj: object) -> bool:
    mod = sys.modules.get("ast")
    return mod is not None and isinstance(obj, mod.AST)
