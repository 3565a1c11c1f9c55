"""Tries to reach the host over the network (the port in feedback) and to import qdevolve."""
import json
import socket


def propose(task, parent, feedback, tools):
    seen = {}
    try:
        with socket.create_connection(("127.0.0.1", feedback["port"]), timeout=2) as conn:
            conn.sendall(b"hello from the agent")
            seen["connect"] = "connected"
    except OSError as exc:
        seen["connect"] = type(exc).__name__
    try:
        import qdevolve  # noqa: F401

        seen["import"] = "imported"
    except ImportError as exc:
        seen["import"] = type(exc).__name__
    return parent + "\n# " + json.dumps(seen)
