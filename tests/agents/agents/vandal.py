"""Tries to write the files named in feedback["paths"] (and one in its own cwd)."""
import json
import os


def propose(task, parent, feedback, tools):
    done = {}
    for path in [*feedback["paths"], os.path.join(os.getcwd(), "mine.txt")]:
        try:
            with open(path, "w") as fh:
                fh.write("vandal was here")
            done[path] = "written"
        except OSError as exc:
            done[path] = f"denied: {type(exc).__name__}"
    return parent + "\n# " + json.dumps(done)
