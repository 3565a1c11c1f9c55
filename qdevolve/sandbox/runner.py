"""The trusted runner: executes INSIDE the sandbox, runs the evaluator, writes one record.

The controller stages this file with ``_standin.py``, ``_wire.py``, ``candidate.py``,
``_mountview.py`` and ``_procctl.py`` (stdlib only, no ``qdevolve`` import) in a read-only directory of the
sandbox and starts::

    python -I -S runner.py WORKDIR/.qdevolve-run

The runner makes itself non-dumpable, reads the run file (``marshal``: paths, rlimits,
cascade thresholds; the nonce arrives on stdin for the process backends), builds the
``local`` view of the host and drops root where asked, sets its rlimits, keeps fd 1 as the
record channel nobody else holds, forks the candidate process (where all candidate code
runs), imports the evaluator, calls it (the program it imports is a stand-in for the
candidate's module, see ``_standin.py``) and writes exactly one JSON record
``{"nonce": ..., "status": ..., ...}`` to the channel. It leaves with ``os._exit``.

The pure helpers (:func:`normalize_result`, :func:`check_record`) are also imported by the
controller to validate the record a second time: a record that fails them is ``invalid``.
"""

from __future__ import annotations

import math
import os
import sys

RUN_FILE = ".qdevolve-run"
MAX_ARTIFACT_CHARS = 65536
MAX_RECORD_BYTES = 4 << 20
RECORD_STATUSES = ("ok", "error", "memory", "invalid", "timeout", "killed")
MAX_ABS = 1e100  # larger |values| overflow sums such as the archive's QD-score
_RESERVED = ("combined_score", "tests", "features", "artifacts", "error")


class ProtocolError(ValueError):
    """An evaluator returned something the protocol does not accept (-> ``invalid``)."""


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        # numpy scalars: accept anything that converts through __float__ and is not a str
        if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
            raise ProtocolError(f"metric {name!r} is not numeric: {type(value).__name__}")
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"metric {name!r} is not numeric: {exc}") from None
    if not math.isfinite(out):
        raise ProtocolError(f"metric {name!r} is not finite: {out}")
    if abs(out) > MAX_ABS:
        raise ProtocolError(f"metric {name!r} = {out:g} exceeds {MAX_ABS:g} in magnitude")
    return out


def _surrogate_free(where: str, text: object) -> None:
    if isinstance(text, str) and not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ProtocolError(f"{where} holds a lone surrogate (not valid Unicode text)") from None


def _one_line(text: object, limit: int = 500) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def normalize_result(raw: object) -> dict:
    """Turn an evaluator's return value into a record body (OpenEvolve-compatible).

    Accepts a dict (``combined_score`` -> score; other numeric values -> metrics; optional
    ``tests`` list in [0, 1], ``features`` dict, ``artifacts`` dict, ``error`` string) or an
    object with ``.metrics`` and ``.artifacts`` (OpenEvolve's ``EvaluationResult``). Without
    ``combined_score`` the score is the mean of the numeric metrics (0 metrics: no score).

    Raises:
        ProtocolError: NaN/inf, non-numeric metrics, tests outside [0, 1], wrong types.
    """
    artifacts_in: object = {}
    if isinstance(raw, dict):
        data = raw
    elif hasattr(raw, "metrics"):
        data = dict(raw.metrics or {})
        artifacts_in = getattr(raw, "artifacts", None) or {}
    else:
        raise ProtocolError(
            f"evaluate() returned {type(raw).__name__}; expected a dict or an object with .metrics"
        )
    if not all(isinstance(k, str) for k in data):
        raise ProtocolError("metric names must be strings")
    if "artifacts" in data:
        artifacts_in = data["artifacts"]
    if not isinstance(artifacts_in, dict):
        raise ProtocolError(f"artifacts must be a dict, got {type(artifacts_in).__name__}")
    artifacts = {str(k): str(v)[:MAX_ARTIFACT_CHARS] for k, v in artifacts_in.items()}
    metrics = {k: _number(k, v) for k, v in data.items() if k not in _RESERVED}
    tests = None
    if data.get("tests") is not None:
        if not isinstance(data["tests"], (list, tuple)):
            raise ProtocolError("tests must be a list of numbers in [0, 1]")
        tests = [_number(f"tests[{i}]", v) for i, v in enumerate(data["tests"])]
        bad = [v for v in tests if not 0.0 <= v <= 1.0]
        if bad:
            raise ProtocolError(f"tests values must lie in [0, 1], got {bad[0]}")
    features = {}
    if data.get("features") is not None:
        if not isinstance(data["features"], dict):
            raise ProtocolError("features must be a dict of numbers")
        features = {str(k): _number(f"features[{k}]", v) for k, v in data["features"].items()}
    if "combined_score" in data:
        score = _number("combined_score", data["combined_score"])
    elif metrics:
        score = sum(metrics.values()) / len(metrics)
    else:
        score = None
    body = {"status": "ok", "score": score, "metrics": metrics, "tests": tests,
            "features": features, "artifacts": artifacts, "error": None}
    err = data.get("error")
    if err is not None and err != "":
        body["status"] = "error"
        body["error"] = "evaluator reported: " + _one_line(err)
        body["artifacts"].setdefault("evaluator_error", str(err)[:MAX_ARTIFACT_CHARS])
    return body


def check_record(record: object, nonce: str) -> dict:
    """Validate a record read back by the controller; raise :class:`ProtocolError` if forged."""
    if not isinstance(record, dict):
        raise ProtocolError("result record is not a JSON object")
    if record.get("nonce") != nonce:
        raise ProtocolError("result record carries a wrong nonce (forged)")
    if record.get("status") not in RECORD_STATUSES:
        raise ProtocolError(f"result record has unknown status {record.get('status')!r}")
    score = record.get("score")
    if score is not None:
        _number("score", score)
    for key in ("metrics", "features", "artifacts"):
        if not isinstance(record.get(key, {}), dict):
            raise ProtocolError(f"result record field {key!r} is not an object")
    for k, v in record.get("metrics", {}).items():
        _number(k, v)
    for k, v in record.get("features", {}).items():
        _number(k, v)
    tests = record.get("tests")
    if tests is not None and (not isinstance(tests, list) or not all(
            0.0 <= _number("tests", v) <= 1.0 for v in tests)):
        raise ProtocolError("result record tests are not a list in [0, 1]")
    if not all(isinstance(v, str) for v in record.get("artifacts", {}).values()):
        raise ProtocolError("result record artifacts are not strings")
    for key in ("metrics", "features", "artifacts"):
        for k, v in record.get(key, {}).items():
            _surrogate_free(f"{key}[{k!r}] name", k)
            _surrogate_free(f"{key}[{k!r}]", v)
    for key in ("error", "stdout"):
        if record.get(key) is not None and not isinstance(record[key], str):
            raise ProtocolError(f"result record field {key!r} is not a string")
        _surrogate_free(key, record.get(key))
    return record


# -- everything below runs only inside the sandbox ----------------------------------------
_ESCAPES = {i: f"\\u{i:04x}" for i in range(32)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def to_json(obj: object) -> str:
    """JSON text of a record (str/float/int/bool/None/list/dict), without importing ``json``
    (whose ``re``/``enum`` imports dominate the runner's start-up). Non-finite floats and
    unknown objects become strings."""
    if obj is None or obj is True or obj is False:
        return "null" if obj is None else ("true" if obj else "false")
    if isinstance(obj, (int, float)):
        value = float(obj)
        return repr(value) if math.isfinite(value) else to_json(str(value))
    if isinstance(obj, str):
        text = obj.translate(_ESCAPES)
        if not text.isascii():  # lone surrogates (from undecodable bytes) become \udcxx escapes
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        return '"' + text + '"'
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(to_json(v) for v in obj) + "]"
    if isinstance(obj, dict):
        return "{" + ",".join(to_json(str(k)) + ":" + to_json(v) for k, v in obj.items()) + "}"
    return to_json(str(obj))


def _load_evaluator(path: str):
    from importlib import _bootstrap, machinery  # importlib.util costs ~5 ms more

    sys.path.insert(0, os.path.dirname(path))
    loader = machinery.SourceFileLoader("evaluator", path)
    spec = machinery.ModuleSpec("evaluator", loader, origin=path)
    spec.has_location = True
    module = _bootstrap.module_from_spec(spec)
    sys.modules["evaluator"] = module
    loader.exec_module(module)
    return module


def _run_builtin(program: str) -> dict:
    """No evaluator: run the program as ``__main__`` in the candidate; 1.0 on a clean end."""
    import _standin

    try:
        _standin.load("__main__", program, "__main__")
    except SystemExit as exc:
        code = exc.code
        if code not in (None, 0, "", "0", "None"):
            return {"status": "error", "score": 0.0, "error": f"program exited with status {code}",
                    "metrics": {}, "tests": None, "features": {}, "artifacts": {}}
    return {"status": "ok", "score": 1.0, "metrics": {"exit_ok": 1.0}, "tests": None,
            "features": {}, "artifacts": {}, "error": None}


def _run_evaluator(module, program: str, thresholds) -> dict:
    stages = [getattr(module, f"evaluate_stage{i}", None) for i in (1, 2, 3)]
    if thresholds is None or stages[0] is None:
        return normalize_result(module.evaluate(program))
    merged: dict = {}
    for i, stage in enumerate(stages):
        if stage is None:
            break
        body = normalize_result(stage(program))
        if merged:
            body["metrics"] = {**merged["metrics"], **body["metrics"]}
            body["features"] = {**merged["features"], **body["features"]}
            body["artifacts"] = {**merged["artifacts"], **body["artifacts"]}
            body["tests"] = body["tests"] if body["tests"] is not None else merged["tests"]
        body["artifacts"]["cascade_stage"] = str(i + 1)
        merged = body
        if body["status"] != "ok":
            break
        if i < len(thresholds) and (body["score"] is None or body["score"] < thresholds[i]):
            body["artifacts"]["cascade_stopped"] = (
                f"stage {i + 1} score {body['score']} < threshold {thresholds[i]}")
            break
    return merged


class _NoImports:
    """A meta-path finder that refuses every new import: installed once the evaluator is
    done, so the runner's failure path and record run only code it had loaded before."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        raise ImportError(f"the runner imports nothing after the evaluation ({name!r})")


def _failure(exc: BaseException, candidate) -> dict:
    """The record of an evaluation that raised: the candidate's fate when it met one."""
    import traceback

    tb = traceback.format_exc()[-MAX_ARTIFACT_CHARS:]
    remote = getattr(exc, "remote_traceback", "")
    artifacts = {"traceback": tb}
    if remote:
        artifacts["candidate_traceback"] = remote[-MAX_ARTIFACT_CHARS:]
    if isinstance(exc, ProtocolError):
        return {"status": "invalid", "error": f"evaluator result rejected: {exc}"}
    if isinstance(exc, MemoryError):
        return {"status": "memory", "error": "MemoryError (memory limit reached)", "artifacts": artifacts}
    fate = candidate.fate if candidate is not None else None
    if fate is not None and fate[0] in ("timeout", "memory", "killed"):
        return {"status": fate[0], "error": fate[1], "artifacts": artifacts}
    return {"status": "error", "error": _one_line(f"{type(exc).__name__}: {exc}"), "artifacts": artifacts}


def preimport() -> None:
    """Import, before the candidate exists, everything the runner may need after it ran (the
    failure path, the record): nothing is imported once candidate code has run. The runner
    writes no bytecode (``-I`` ignores ``PYTHONDONTWRITEBYTECODE``)."""
    sys.dont_write_bytecode = True
    import linecache  # noqa: F401 - traceback formatting reads source lines through it
    import resource  # noqa: F401 - peak memory in the record
    import runpy  # noqa: F401 - the stand-in replaces its run_path
    import tokenize  # noqa: F401 - linecache opens source files with it
    import traceback  # noqa: F401 - the failure path

    import _codeorigin  # noqa: F401 - installed in finish
    import _importguard  # noqa: F401 - installed in finish


def _copy_staged(src_root: str, dst_root: str, rel: str) -> None:
    """Copy one staged program file ``rel`` (checked again: relative, no ``..``) into the
    work tmpfs, read-only; directories made for it are sticky and world-writable like the
    work directory itself, so everything under it counts as the candidate's."""
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"refusing program file path {rel!r}")
    with open(os.path.join(src_root, rel), "rb") as fh:
        source = fh.read()
    target = dst_root
    for part in parts[:-1]:
        target = os.path.join(target, part)
        if not os.path.isdir(target):
            os.mkdir(target)
            os.chmod(target, 0o1777)
    dst = os.path.join(dst_root, rel)
    try:
        os.unlink(dst)  # a warm container's last one, if its wipe failed
    except OSError:
        pass
    with open(dst, "wb") as fh:
        fh.write(source)
    os.chmod(dst, 0o444)  # not the candidate's (sticky dir, another uid)


def main(argv: list) -> None:
    import signal

    sys.dont_write_bytecode = True
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)  # -I leaves the script's directory out
    import _procctl

    _procctl.nondumpable()
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as pid 1 a default action means "ignored"
    run_path = argv[1]
    import marshal

    with open(run_path, "rb") as fh:
        cfg = marshal.loads(fh.read())
    try:
        os.unlink(run_path)
    except OSError:  # bound read-only (bwrap): the nonce it holds opens nothing
        pass
    # three principals: started as root (docker: only SETUID, SETGID and KILL; local and bwrap
    # as root: in namespaces of their own), the runner forks the candidate under a uid of its
    # own and then drops to the runner's uid, keeping only CAP_KILL (to stop the candidate)
    users = cfg.get("users")
    cand_user = None if users is None else tuple(users["candidate"])
    if cfg.get("reap_keep") is not None:
        _procctl.reap(set(cfg["reap_keep"]) | {1}, None if users is None else {users["candidate"][0], users["runner"][0]})
        owners = [] if users is None else [tuple(users["candidate"]), tuple(users["runner"])]
        left = _procctl.wipe(["/tmp", "/dev/shm", *([cfg["work_dir"]] if cfg.get("work_dir") else [])], owners)
        left += _procctl.clear_ipc(owners)  # SysV IPC and POSIX queues: the namespace is the container's
        if left:  # never run in what an earlier evaluation left: the controller replaces the container
            os.write(2, f"qdevolve: the warm container could not be emptied ({len(left)} entries left)\n".encode())
            os._exit(3)
    workdir = os.path.dirname(os.path.abspath(run_path))
    if cfg.get("view") is not None:  # local: hide the host, private tmpfs, then drop root
        import _mountview

        _mountview.build(cfg["view"], workdir, int(cfg["tmp_mb"]), int(cfg["work_mb"]))
        if cfg.get("drop_uid") is not None:
            _mountview.drop(int(cfg["drop_uid"]), int(cfg["drop_gid"]))
        _procctl.nondumpable()  # a credential change resets the flag to the system's default
        _procctl.no_new_privs()
    if cfg.get("work_dir"):  # docker: the program arrives read-only; work in the quota'd tmpfs
        workdir = cfg["work_dir"]
        if users is not None:  # docker copies the image directory's mode onto the tmpfs
            os.chmod(workdir, 0o1777)
        staged = os.path.dirname(cfg["program"])
        main = os.path.basename(cfg["program"])
        for rel in cfg.get("tree_files") or [main]:  # a tree: every file at its relative path
            _copy_staged(staged, workdir, rel)
        cfg["program"] = os.path.join(workdir, main)
    own, cand_cpu = _procctl.split_cpu({k: tuple(v) for k, v in cfg.get("rlimits", {}).items()},
                              float(cfg.get("run_s") or 0))
    _procctl.set_rlimits(own)
    nonce = cfg.pop("nonce", None)  # None: it arrives on stdin once the candidate exists
    channel = os.dup(1)  # the record channel: fd 1 as the controller gave it, kept by no one else
    for p in cfg.get("sys_path", []):
        sys.path.append(p)
    os.chdir(workdir)
    import _standin

    drain = _standin.Drain(int(cfg.get("output_bytes", 1 << 20)))
    import candidate as _candidate  # noqa: F401 - a forked candidate runs it

    preimport()
    sys.path.remove(here)
    candidate = _standin.Candidate(
        sys.executable, os.path.join(here, "candidate.py"), list(cfg.get("sys_path", [])),
        float(cfg.get("call_s") or 1e9), float(cfg.get("cpu_s") or 1e9), float(cfg.get("run_s") or 1e9),
        fork_only=nonce is None, cpu_rlimit=cand_cpu, user=cand_user)
    # fork the candidate from this state (no interpreter start-up; docker, whose nonce is in
    # memory already: a fresh interpreter), then become the runner's uid, then read the nonce:
    # the candidate's memory never held it, and it cannot read stdin (its fd 0 is /dev/null)
    _procctl.no_new_privs()  # inherited by the candidate: no exec gains it privileges
    candidate.start()
    if users is not None:
        _procctl.drop_keeping_kill(*users["runner"])
        _procctl.nondumpable()
    if nonce is None:
        nonce = _read_nonce()
    finish(cfg, nonce, channel, drain, candidate)


def _read_nonce() -> str:
    data = b""
    while len(data) < 256:
        chunk = os.read(0, 256)
        if not chunk:
            break
        data += chunk
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return data.decode("ascii", "replace").strip()


def finish(cfg: dict, nonce: str, channel: int, drain, candidate) -> None:
    """Run the evaluation against ``candidate``, write the one record to ``channel``, exit."""
    import _procctl
    import _standin

    _standin.CANDIDATE = candidate
    try:
        import _codeorigin
        import _importguard

        _importguard.install(cfg["program"], None if candidate.user is None else candidate.user[0])
        _standin.install()
        # from here on no code built from the candidate's bytes runs in this process
        _codeorigin.install(cfg["program"], candidate.user, list(sys.path))
        if cfg.get("evaluator"):
            body = _run_evaluator(_load_evaluator(cfg["evaluator"]), cfg["program"], cfg.get("cascade"))
        else:
            body = _run_builtin(cfg["program"])
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a record
        sys.meta_path.insert(0, _NoImports)  # the failure path runs only what is loaded
        try:
            body = _failure(exc, candidate)
        except BaseException as again:  # noqa: BLE001 - even formatting may fail
            body = {"status": "error", "error": _one_line(f"{type(exc).__name__}: {exc} "
                                                          f"(and {type(again).__name__} describing it)")}
    if sys.meta_path[0] is not _NoImports:
        sys.meta_path.insert(0, _NoImports)
    candidate.close()
    if cfg.get("reap_keep") is not None:
        users = cfg.get("users")
        _procctl.reap(set(cfg["reap_keep"]) | {1}, None if users is None else {users["candidate"][0], users["runner"][0]})
    stdout, cut = drain.finish()
    body["nonce"] = nonce
    body["stdout"] = stdout
    body["stdout_truncated"] = cut
    try:
        import resource  # preimported: _NoImports stops any new one

        body["peak_memory_mb"] = max(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024.0
        data = to_json(body).encode()
    except BaseException as exc:  # noqa: BLE001
        data = to_json({"nonce": nonce, "status": "error",
                        "error": f"result not serialisable: {_one_line(exc)}"}).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(channel, view):]
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
