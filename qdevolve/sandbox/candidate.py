"""The candidate process: runs the untrusted program and answers the runner's requests.

Started by the trusted runner (``runner.py``) inside the sandbox as
``python -I -S candidate.py FD [SYS_PATH...]``, with stdout a pipe the runner drains, the
sandbox's stderr, and ``FD`` one end of a socket pair: the only thing it shares with the
runner. Nothing here is trusted. The candidate may rewrite any of this process (modules,
builtins, frames, this very loop); all the runner ever accepts from it is what
:func:`_wire.decode` builds on the runner's side: plain data, or handles to functions that
stay here (which the runner can only call). Values are converted to plain data here, in this
process; a value that is neither plain data nor callable makes the request fail with a
``TypeError`` naming its type. Stdlib only, like the runner.
"""

from __future__ import annotations

import os
import socket
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves it out
import _wire  # noqa: E402


class _EvaluatorObject:
    """A callable that stands for an object of the evaluator (a callback such as a counting
    objective); only calls and calls of public methods reach the evaluator."""

    def __init__(self, endpoint: _wire.Endpoint, handle: _wire.Handle) -> None:
        self._endpoint, self._handle = endpoint, handle

    def __call__(self, *args, **kwargs):
        return self._endpoint.request("call", self._handle, None, args, kwargs)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        endpoint, handle = self._endpoint, self._handle
        return lambda *args, **kwargs: endpoint.request("call", handle, name, args, kwargs)


_LOADED: list = []  # the program's modules: the only non-callables exported (load's reply)


def _exportable(obj: object) -> bool:
    return callable(obj) or any(obj is m for m in _LOADED)


def _load(name: str, path: str, run_name: str, source: object = None) -> types.ModuleType:
    """Execute the program (or ``source``, text the evaluator meant to execute, compiled as
    ``path``) as module ``run_name`` (``__main__`` for scripts) and return it."""
    if source is None:
        with open(path, "rb") as fh:
            source = fh.read()
    code = compile(source, path, "exec")
    module = types.ModuleType(run_name)
    module.__file__ = path
    module.__builtins__ = __builtins__
    for key in {run_name, name} - {None, ""}:
        if key == "__main__" or key not in sys.modules:  # never shadow a real module
            sys.modules[key] = module
    sys.argv = [path]
    _LOADED.append(module)
    try:
        exec(code, module.__dict__)
    finally:
        _flush()
    return module


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed or replaced stream is the program's business
            pass


def main(argv: list) -> None:
    fd = int(argv[1])
    for p in argv[2:]:
        sys.path.append(p)
    sys.path[0] = os.getcwd()  # like ``python program.py`` run from the work dir
    sock = socket.socket(fileno=fd)
    endpoint = _wire.Endpoint(sock, "c", _EvaluatorObject, lambda op, target, name: None, _load,
                              exportable=_exportable)
    while True:
        try:
            msg = endpoint.receive()
        except _wire.WireError:
            break
        endpoint.serve(msg)
        _flush()
    _flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
