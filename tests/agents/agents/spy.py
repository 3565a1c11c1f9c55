"""Tries to read the files named in feedback["paths"]; returns what it saw, per path."""
import json
import os


def propose(task, parent, feedback, tools):
    seen = {}
    for path in feedback["paths"]:
        try:
            if os.path.isdir(path):
                seen[path] = "listed: " + " ".join(sorted(os.listdir(path)))
            else:
                with open(path, "rb") as fh:
                    seen[path] = "read: " + fh.read(4096).decode("utf-8", "replace")
        except OSError as exc:
            seen[path] = f"denied: {type(exc).__name__}"
    return parent + "\n# " + json.dumps(seen)
