"""The agent-side bootstrap: the first (and only trusted) code of the agent's process.

Standard library only, run as ``python -I -S _boot.py config.json`` by the interpreter the
sandbox uses for candidates.  Before any agent code loads it builds the sandbox's view
(``local`` as root: ``_mountview``), drops to the candidate's uid, sets ``no_new_privs``
and rlimits; then it loads ``agent.py``, calls ``propose(task, parent, feedback, tools)``
and sends one last frame on the request pipe::

    {"op": "result", "child": <str>}                       propose returned a string
    {"op": "result", "child": null, "type": <type name>}   propose returned something else
    {"op": "error", "kind": "error" | "memory", "error": <one line>}

Nothing the agent can do here is trusted by the controller: the frames are checked there.
"""

import json
import os
import sys
import traceback


def _one_line(exc):
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text[:500]


def _drop_capabilities():
    """Empty the bounding, effective, permitted and inheritable sets (``local`` in a user
    namespace: the agent stays namespace root by uid, but can no longer mount or unmount
    what hides the host, and no exec gives the capabilities back)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP; unknown capabilities fail harmlessly
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    if libc.capset(header, (ctypes.c_uint32 * 6)()) != 0:
        raise OSError(ctypes.get_errno(), "capset(0) failed")


def main():
    sys.dont_write_bytecode = True  # -I ignores PYTHONDONTWRITEBYTECODE; the stage stays as staged
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    with open(sys.argv[1], encoding="utf-8") as fh:
        cfg = json.load(fh)
    import _mountview
    import _procctl

    if cfg.get("view") is not None:  # local as root: hide the host's private directories
        _mountview.build(cfg["view"], here, cfg["tmp_mb"], cfg["work_mb"])
        os.chdir(here)
    if cfg.get("drop"):
        _mountview.drop(*cfg["drop"])
    elif cfg.get("view") is not None:
        _drop_capabilities()
    _procctl.no_new_privs()
    _procctl.set_rlimits({k: tuple(v) for k, v in cfg["rlimits"].items()})
    read_fd, write_fd = cfg["fds"]
    for fd in (read_fd, write_fd):
        os.set_inheritable(fd, False)
    sys.path.extend(cfg.get("sys_path", []))
    import qdevolve_agent

    channel = qdevolve_agent.Channel(read_fd, write_fd)
    try:
        with open(os.path.join(here, "agent.py"), encoding="utf-8") as fh:
            source = fh.read()
        namespace = {"__name__": "agent", "__file__": "agent.py"}
        exec(compile(source, "agent.py", "exec"), namespace)  # noqa: S102 - inside the sandbox
        propose = namespace.get("propose")
        if not callable(propose):
            raise TypeError("the agent defines no propose(task, parent, feedback, tools) function")
        child = propose(cfg["task"], cfg["parent"], cfg["feedback"], qdevolve_agent.Tools(channel))
    except MemoryError as exc:
        channel.send({"op": "error", "kind": "memory", "error": _one_line(exc) or "MemoryError"})
        return 1
    except BaseException as exc:  # noqa: BLE001 - every failure of the agent is reported
        traceback.print_exc()
        channel.send({"op": "error", "kind": "error", "error": _one_line(exc)})
        return 1
    if isinstance(child, str):
        channel.send({"op": "result", "child": child})
    else:
        channel.send({"op": "result", "child": None, "type": type(child).__name__})
    return 0


if __name__ == "__main__":
    sys.exit(main())
