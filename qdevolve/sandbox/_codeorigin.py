"""Default-deny for code in the trusted runner: where its bytes came from (stdlib only).

Staged next to ``runner.py`` and installed by ``runner.finish`` once the candidate exists,
before the evaluator is imported. An audit hook (``sys.addaudithook``: it cannot be removed)
sees every ``compile`` (``compile``/``exec``/``eval`` of text, imports of source files),
``marshal.load(s)`` (bytecode), ``code.__new__`` and ``ctypes.dlopen`` in the runner and
refuses (``PermissionError``) any that builds code from bytes the candidate could have
written. The rule never looks at the candidate's text; it asks where the bytes came from:

* a **path is the candidate's** when it is the program, a file or directory the runner wrote,
  copied, renamed or linked once tainted (it may hold candidate bytes), or the candidate's uid could have
  written it: it, or a directory on its way (lexical or resolved), is owned by that uid,
  group- or world-writable, or lies in a directory the candidate may write (in a sticky one:
  unless the entry is someone else's); a read-only mount is nobody's. Without a uid of its
  own (a normal user's sandbox: one uid for both) the candidate's places are the work
  directory and the program's directory, and whatever is world-writable outside sticky ones;
* the runner is **tainted** from the first byte that may be the candidate's: a reply from
  the candidate process (``_standin``), an ``open`` for reading of one of its paths, a listing of one of
  its directories, or a child process (whose output may relay anything). Before that no
  candidate byte is in the runner, so no code can be built from one;
* once tainted, code is built only from bytes of a trusted origin: a source or bytecode
  file that is not the candidate's, read by the import system (``SourceLoader.get_code``)
  or ``runpy``; a string constant of the calling function itself (the evaluator's own
  ``exec("...")``); text the standard library generates from identifiers it validated
  (``dataclasses``, ``collections.namedtuple``); a ``typing.ForwardRef`` that is a pure type
  expression (names, attributes, subscripts, constants, ``|``); a module body of an installed library
  (under ``sys.prefix`` or the sandbox's site-packages) while the import system runs it;
  and ``ast.parse``, which builds no code. Everything else is refused.

``_standin`` turns the refused cases an evaluator means (``exec`` of the program's text,
however it was read or re-encoded) into execution in the candidate's process.
"""

from __future__ import annotations

import os
import stat
import sys

_STATE: dict = {"installed": False, "ast_only": None, "areas": (), "written": set(), "tainted": None, "program": None, "uid": None, "gid": None,
                "roots": (), "skip": ()}
_TRUSTED_DIRS: set = set()  # directories the candidate cannot write (that never changes)


class CodeOriginError(PermissionError):
    """Code built from bytes the candidate could have written, refused in the runner."""


def taint(why: str) -> None:
    """Record that bytes the candidate may have written have reached the runner."""
    if _STATE["tainted"] is None:
        _STATE["tainted"] = why


def tainted() -> str | None:
    """Why the runner holds candidate bytes (None: it holds none)."""
    return _STATE["tainted"]


def _thread() -> int:
    import _thread

    return _thread.get_ident()


def ast_only(compile_, *args, **kwargs):
    """``compile_(*args, **kwargs)`` with ``PyCF_ONLY_AST``: an AST, no code (always allowed)."""
    me, outer = _thread(), _STATE["ast_only"]
    _STATE["ast_only"] = me
    try:
        return compile_(*args, **kwargs)
    finally:
        _STATE["ast_only"] = outer


def _writable_by_candidate(st: os.stat_result) -> bool:
    uid, gid = _STATE["uid"], _STATE["gid"]
    mode = st.st_mode
    if uid is None:  # one uid for both: the candidate's places are named (``areas``), as
        return bool(mode & 0o002)  # ``_importguard`` does, or world-writable
    return st.st_uid == uid or bool(mode & 0o002) or (bool(mode & 0o020) and st.st_gid == gid)


def _read_only(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _chain_is_candidates(path: str) -> bool:
    """Walk ``path`` (absolute) from ``/``: is it, or could it be made, the candidate's?"""
    me = _STATE["uid"] if _STATE["uid"] is not None else os.getuid()
    parts = [p for p in path.split("/") if p]
    cur, writable, sticky = "", False, False
    for i, part in enumerate(parts):
        cur = cur + "/" + part
        last = i == len(parts) - 1
        if not last and cur in _TRUSTED_DIRS:
            writable = sticky = False
            continue
        try:
            st = os.lstat(cur)
        except OSError:  # missing: the candidate's when it may create it there
            return writable
        if writable and (not sticky or (st.st_uid == me and _STATE["uid"] is not None)):
            return True  # it may replace the entry (one uid: only its named places count)
        if stat.S_ISLNK(st.st_mode):  # the resolved path is walked too
            return st.st_uid == me and _STATE["uid"] is not None
        mine = _writable_by_candidate(st) and not _read_only(cur)
        if last or not stat.S_ISDIR(st.st_mode):
            return mine
        writable, sticky = mine, bool(st.st_mode & stat.S_ISVTX)
        if not mine:
            _TRUSTED_DIRS.add(cur)  # nobody on its way is the candidate's: that never changes
    return False


def candidates_path(path: object) -> bool:
    """Whether ``path`` names the program or a file the candidate could have written."""
    if isinstance(path, int):  # a descriptor: opened earlier, judged then
        return False
    try:
        text = os.fsdecode(path)
    except (TypeError, ValueError):
        return True
    if not text:
        return False
    absolute = os.path.abspath(text)
    try:
        real = os.path.realpath(absolute)
    except (OSError, ValueError):
        return True
    if real == _STATE["program"] or absolute == _STATE["program"]:
        return True
    if any((p + "/").startswith(area) for p in (absolute, real) for area in (*_STATE["areas"], *_STATE["written"])):
        return True
    return _chain_is_candidates(absolute) or (real != absolute and _chain_is_candidates(real))


def _codes() -> dict:
    import runpy
    from importlib import _bootstrap
    from importlib import _bootstrap_external as be

    lib = os.path.dirname(os.__file__)
    # (file, function name): the standard library's generators of code from identifiers
    gens = {(os.path.join(lib, "dataclasses.py"), "_create_fn"), (os.path.join(lib, "dataclasses.py"), "add_fns_to_class"),
            (os.path.join(lib, "collections", "__init__.py"), "namedtuple")}
    return {"generators": gens, "parse": (os.path.join(lib, "ast.py"), "parse"),
            "forward_ref": (os.path.join(lib, "typing.py"), "__init__"),
            "frames_removed": _bootstrap._call_with_frames_removed.__code__,
            "source_to_code": be.SourceLoader.source_to_code.__code__, "get_code": be.SourceLoader.get_code.__code__,
            "compile_bytecode": be._compile_bytecode.__code__, "runpy_file": runpy._get_code_from_file.__code__}


_CODES: dict = {}


def _caller(frame):
    """The first frame that is not this guard, the stand-in's wrappers or importlib's
    ``_call_with_frames_removed``."""
    skip = _STATE["skip"]
    while frame is not None and (frame.f_code.co_filename in skip or frame.f_code is _CODES["frames_removed"]):
        frame = frame.f_back
    return frame


def _literal(source: object, frame) -> bool:
    """``source`` is a string constant of the function that compiles it."""
    if isinstance(source, (bytes, bytearray)):
        wanted = bytes(source)
    elif isinstance(source, str):
        wanted = source.encode("utf-8", "surrogatepass")
    else:
        return False
    for const in frame.f_code.co_consts:
        if isinstance(const, str) and const.encode("utf-8", "surrogatepass") == wanted:
            return True
        if isinstance(const, bytes) and const == wanted:
            return True
    return False


def _import_source(source: object, frame) -> bool:
    """Bytes the import system (or ``runpy``) read from a file that is not the candidate's."""
    code = frame.f_code
    if code is _CODES["source_to_code"]:
        outer = _caller(frame.f_back)
        if outer is None or outer.f_code is not _CODES["get_code"]:
            return False
        data = outer.f_locals.get("source_bytes")
        path = outer.f_locals.get("source_path")
        return isinstance(path, str) and not candidates_path(path) and (
            source is data or source == data or (isinstance(data, bytes) and isinstance(source, bytes)
                                                 and _decoded(data) == source))
    if code is _CODES["compile_bytecode"]:
        path = frame.f_locals.get("bytecode_path")
        return isinstance(path, str) and not candidates_path(path)
    if code is _CODES["runpy_file"]:
        path = frame.f_locals.get("decoded_path")
        return isinstance(path, str) and not candidates_path(path)
    return False


def _decoded(data: bytes) -> bytes:
    from importlib import _bootstrap_external as be

    try:
        return be.decode_source(data).encode("utf-8", "surrogatepass")
    except Exception:  # noqa: BLE001 - not decodable: not the same bytes
        return b""


def _library_module(frame) -> bool:
    """A module body of an installed library, run by the import system, and only library
    code between it and the compile."""
    def library(path: str) -> bool:
        return any(path.startswith(root) for root in _STATE["roots"]) and not candidates_path(path)

    f = frame
    while f is not None and f.f_code.co_name != "<module>":
        if not library(f.f_code.co_filename):
            return False
        f = f.f_back
    if f is None or f.f_back is None or f.f_back.f_code is not _CODES["frames_removed"]:
        return False
    return library(f.f_code.co_filename)


def trusted_source(source: object, frame) -> bool:
    """Whether code compiled from ``source`` by ``frame`` (the caller) may run in the runner."""
    if _STATE["tainted"] is None or frame is None:
        return _STATE["tainted"] is None
    where = (frame.f_code.co_filename, frame.f_code.co_name)
    if where == _CODES["parse"] or where in _CODES["generators"] or _STATE["ast_only"] == _thread():
        return True
    if where == _CODES["forward_ref"]:
        return _type_expression(source)
    return _literal(source, frame) or _import_source(source, frame) or _library_module(frame)


_TYPE_NODES = ("Expression", "Name", "Attribute", "Subscript", "Tuple", "List", "Constant", "BinOp",
               "BitOr", "Load", "Index", "Slice")


def _type_expression(source: object) -> bool:
    """``typing.ForwardRef`` of a pure type expression (names, attributes, subscripts,
    constants, ``|``): evaluating it calls nothing the text names."""
    import ast

    try:
        tree = ast_only(ast.parse, source if isinstance(source, str) else bytes(source).decode("utf-8"),
                        mode="eval")
    except (SyntaxError, ValueError, TypeError):
        return False
    return all(type(node).__name__ in _TYPE_NODES for node in ast.walk(tree)) and all(
        isinstance(op.op, ast.BitOr) for op in ast.walk(tree) if isinstance(op, ast.BinOp))


def _refuse(what: str) -> None:
    raise CodeOriginError(
        f"the trusted runner refuses {what}: it is built from bytes the candidate could have written "
        f"({_STATE['tainted']}); the candidate's code runs only in the candidate's process, through "
        "the stand-in (load the program with importlib, runpy or exec of its text)")


def _reads(mode: object, flags: object) -> bool:
    """Whether an ``open`` may read bytes someone else wrote (writing brings no byte of the
    candidate in; nor does a file this open creates, ``O_CREAT | O_EXCL``)."""
    if isinstance(mode, str):
        return "x" not in mode and ("r" in mode or "+" in mode)
    if isinstance(flags, int):
        new = flags & (os.O_CREAT | os.O_EXCL) == (os.O_CREAT | os.O_EXCL)
        return not new and flags & os.O_ACCMODE != os.O_WRONLY
    return True


def _writes(mode: object, flags: object) -> bool:
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    if isinstance(flags, int):
        return flags & os.O_ACCMODE != os.O_RDONLY or bool(flags & os.O_CREAT)
    return True


def _written(path: object) -> None:
    try:
        real = os.path.realpath(os.path.abspath(os.fsdecode(path)))
    except (OSError, ValueError, TypeError):
        return
    _STATE["written"].add(real.rstrip("/") + "/")


def _hook(event: str, args: tuple) -> None:
    if event == "open":
        path, mode, flags = args
        if path is None or isinstance(path, int):
            return
        if _reads(mode, flags) and candidates_path(path):
            taint(f"the runner opened {os.fsdecode(path)!r}")
        if _STATE["tainted"] is not None and _writes(mode, flags):
            _written(path)  # what the runner writes once it holds candidate bytes may hold them
        return
    if event in ("os.rename", "shutil.copyfile", "shutil.copytree", "os.link", "os.symlink", "shutil.move"):
        if _STATE["tainted"] is not None and len(args) > 1 and isinstance(args[1], (str, bytes, os.PathLike)):
            _written(args[1])
        return
    if event in ("os.listdir", "os.scandir", "glob.glob"):
        if args and args[0] is not None and not isinstance(args[0], int) and candidates_path(args[0]):
            taint(f"the runner listed {os.fsdecode(args[0])!r}")
        return
    if event in ("subprocess.Popen", "os.posix_spawn", "os.spawn", "os.system", "os.exec", "pty.spawn"):
        taint(f"the runner started a process ({event})")
        return
    if event == "compile":
        source, filename = args[0], args[1]
        frame = _caller(sys._getframe(1))
        if not trusted_source(source, frame):
            _refuse(f"compiling {filename!r}")
        return
    if event in ("marshal.loads", "marshal.load"):
        frame = _caller(sys._getframe(1))
        if not trusted_source(None, frame):
            _refuse("loading marshalled code")
        return
    if event == "code.__new__":
        if _STATE["tainted"] is not None:
            _refuse("building a code object")
        return
    if event == "ctypes.dlopen":
        if args and args[0] is not None and candidates_path(args[0]):
            _refuse(f"loading the library {args[0]!r}")


def install(program: str, candidate_user: tuple | None, library_roots: list) -> None:
    """Guard the runner from here on (see the module doc); once per process."""
    if _STATE["installed"]:
        return
    _STATE.update(installed=True, program=os.path.realpath(program),
                  uid=None if candidate_user is None else int(candidate_user[0]),
                  gid=None if candidate_user is None else int(candidate_user[1]))
    if _STATE["uid"] == os.getuid():
        _STATE["uid"] = _STATE["gid"] = None
    if _STATE["uid"] is None:  # one uid: the candidate's places are named
        areas = {os.getcwd(), os.path.dirname(_STATE["program"])}
        _STATE["areas"] = tuple(os.path.realpath(a).rstrip("/") + "/" for a in areas if a)
    roots = {os.path.realpath(p) + "/" for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, *library_roots) if p}
    _STATE["roots"] = tuple(r for r in roots if r != "//")
    here = os.path.dirname(os.path.abspath(__file__))
    _STATE["skip"] = (__file__, os.path.join(here, "_codeorigin.py"), os.path.join(here, "_standin.py"))
    _CODES.update(_codes())
    sys.addaudithook(_hook)
