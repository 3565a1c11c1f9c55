"""The trusted runner: executes INSIDE the sandbox, loads the evaluator, writes one record.

The controller copies this file (stdlib only, no ``qdevolve`` import, so it starts in a few
milliseconds under ``python -I -S``) into a read-only directory of the sandbox and starts::

    python -I -S runner.py WORKDIR/.qdevolve-run

The run file (``marshal``: no import needed to read it) carries the per-run nonce, the program and evaluator paths, the rlimits and the
cascade thresholds. The runner reads it and deletes it before any untrusted code runs, sets
its own rlimits (so no ``preexec_fn`` is needed in the multi-threaded controller), opens the
result file with ``O_EXCL``, imports the evaluator, calls it and writes exactly one JSON
record ``{"nonce": ..., "status": ..., ...}``. It then leaves with ``os._exit`` so that
``atexit`` handlers planted by the candidate cannot stall it.

The pure helpers (:func:`normalize_result`, :func:`check_record`) are also imported by the
controller to validate the record a second time: a record that fails them is ``invalid``.
"""

from __future__ import annotations

import math
import os
import sys

RUN_FILE = ".qdevolve-run"
RESULT_FILE = ".qdevolve-result.json"
MAX_ARTIFACT_CHARS = 65536
MAX_RECORD_BYTES = 4 << 20
RECORD_STATUSES = ("ok", "error", "memory", "invalid")
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
    return out


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


def _set_rlimits(limits: dict) -> None:
    import resource

    for name, (soft, hard) in limits.items():
        res = getattr(resource, "RLIMIT_" + name)
        cur_soft, cur_hard = resource.getrlimit(res)
        if cur_hard != resource.RLIM_INFINITY:
            hard = min(hard, cur_hard)
            soft = min(soft, hard)
        try:
            resource.setrlimit(res, (soft, hard))
        except (ValueError, OSError):
            resource.setrlimit(res, (min(soft, cur_hard), cur_hard))


def _reap(keep: set) -> None:
    """Kill every process of this pid namespace except ``keep`` (docker warm mode)."""
    import signal

    me = os.getpid()
    for _ in range(50):
        found = False
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) not in keep and int(entry) != me:
                try:
                    os.kill(int(entry), signal.SIGKILL)
                    found = True
                except OSError:
                    pass
        if not found:
            return


def _wipe(path: str) -> None:
    import shutil

    for name in os.listdir(path):
        full = os.path.join(path, name)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            try:
                os.unlink(full)
            except OSError:
                pass


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
    with open(program, "rb") as fh:
        code = compile(fh.read(), program, "exec")
    sys.argv = [program]
    try:
        exec(code, {"__name__": "__main__", "__file__": program, "__builtins__": __builtins__})
    except SystemExit as exc:
        code = exc.code
        if code not in (None, 0):
            return {"status": "error", "score": 0.0, "error": f"program exited with status {code}",
                    "metrics": {}, "tests": None, "features": {}, "artifacts": {}}
    sys.stdout.flush()
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


def _init_and_wait() -> None:
    """As pid 1 of a fresh pid namespace: fork, reap every orphan, exit like the child.

    A namespace init ignores signals it has no handler for (SIGXCPU, even the kernel's CPU
    SIGKILL), so the evaluation must not run as pid 1. Exit status: the child's, or 128 + N.
    """
    child = os.fork()
    if child == 0:
        return
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)


def main(argv: list) -> None:
    if os.getpid() == 1:
        _init_and_wait()
    me = os.getpid()
    run_path = argv[1]
    import marshal

    with open(run_path, "rb") as fh:
        cfg = marshal.loads(fh.read())
    os.unlink(run_path)
    if cfg.get("reap_keep") is not None:
        _reap(set(cfg["reap_keep"]) | {1})
        _wipe("/tmp")
    _set_rlimits({k: tuple(v) for k, v in cfg.get("rlimits", {}).items()})
    nonce = cfg.pop("nonce")
    workdir = os.path.dirname(os.path.abspath(run_path))
    fd = os.open(os.path.join(workdir, RESULT_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    for p in cfg.get("sys_path", []):
        sys.path.append(p)
    os.chdir(workdir)
    try:
        if cfg.get("evaluator"):
            body = _run_evaluator(_load_evaluator(cfg["evaluator"]), cfg["program"],
                                  cfg.get("cascade"))
        else:
            body = _run_builtin(cfg["program"])
    except ProtocolError as exc:
        body = {"status": "invalid", "error": f"evaluator result rejected: {exc}"}
    except MemoryError:
        body = {"status": "memory", "error": "MemoryError (memory limit reached)"}
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a record
        import traceback

        tb = traceback.format_exc()[-MAX_ARTIFACT_CHARS:]
        body = {"status": "error", "error": _one_line(f"{type(exc).__name__}: {exc}"),
                "artifacts": {"traceback": tb}}
    if os.getpid() != me:  # a forked copy of the runner (the candidate forked): no record
        os._exit(1)
    body["nonce"] = nonce
    if cfg.get("reap_keep") is not None:
        _reap(set(cfg["reap_keep"]) | {1})
    try:
        import resource

        body["peak_memory_mb"] = max(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024.0
        data = to_json(body).encode()
    except BaseException as exc:  # noqa: BLE001
        data = to_json({"nonce": nonce, "status": "error",
                        "error": f"result not serialisable: {_one_line(exc)}"}).encode()
    os.write(fd, data)
    os.close(fd)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
