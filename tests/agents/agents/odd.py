"""Misbehaves in the way feedback["mode"] names."""
import ctypes


def propose(task, parent, feedback, tools):
    mode = feedback["mode"]
    if mode == "nonstring":
        return 42
    if mode == "huge":
        return "x" * feedback["size"]
    if mode == "crash":
        raise ValueError("the agent gave up")
    if mode == "segfault":
        ctypes.string_at(0)
    if mode == "exit":
        raise SystemExit(3)
    if mode == "no_propose":
        return None
    raise ValueError(mode)
