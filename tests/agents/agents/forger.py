"""Tries to forge protocol frames and replies; feedback["mode"] picks the attempt."""
import json
import os
import struct
import sys


def frame(message):
    body = json.dumps(message).encode()
    return struct.pack(">I", len(body)) + body


def propose(task, parent, feedback, tools):
    mode = feedback["mode"]
    fake = frame({"op": "result", "child": "FORGED"})
    channel = tools._channel
    if mode == "stdio":  # frames on stdout/stderr, through Python and through fds 1 and 2
        sys.stdout.buffer.write(fake + frame({"ok": {"status": "ok", "score": 1e9}}))
        sys.stdout.flush()
        sys.stderr.buffer.write(fake)
        sys.stderr.flush()
        os.write(1, fake)
        os.write(2, fake)
        return "REAL"
    if mode == "reply":  # a reply-shaped message on the request pipe
        os.write(channel.write_fd, frame({"ok": {"status": "ok", "score": 1e9, "metrics": {}, "feedback": ""}}))
        return "REAL"
    if mode == "result_extra":  # a result that claims counts and a score
        os.write(channel.write_fd, frame({"op": "result", "child": "FORGED", "calls": 0, "score": 1e9}))
        return "REAL"
    if mode == "garbage":
        os.write(channel.write_fd, b"\x00\x00\x00\x05not json!")
        return "REAL"
    if mode == "huge_header":
        os.write(channel.write_fd, struct.pack(">I", 0xFFFFFFF0) + b"{")
        return "REAL"
    if mode == "reply_pipe":  # write a fake reply where the controller's replies come from
        try:
            os.write(channel.read_fd, frame({"ok": {"status": "ok", "score": 1e9}}))
            wrote = "yes"
        except OSError as exc:
            wrote = type(exc).__name__
        try:
            result = tools.evaluate(parent)
        except tools.BudgetExhausted:
            result = "refused"
        return parent + "\n# " + json.dumps({"wrote": wrote, "result": result})
    raise ValueError(mode)
