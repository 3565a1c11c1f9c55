"""Print the bubblewrap command line qdevolve's ``bwrap`` backend uses (its "profile").

The policy lives in one place, :func:`qdevolve.sandbox.limits.render_bwrap_argv`; this
script renders it for inspection or for running a program by hand under the same policy:

    python sandboxes/bwrap/print-profile.py --workdir /tmp/w --wall-s 10 --memory-mb 512
"""

from __future__ import annotations

import argparse
import shlex

from qdevolve.sandbox._staging import sandbox_python, site_packages
from qdevolve.sandbox.limits import SandboxLimits, render_bwrap_argv, render_env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workdir", default="/tmp/qdevolve-work")
    ap.add_argument("--runner-dir", default="/tmp/qdevolve-runner")
    ap.add_argument("--uid", type=int, default=62000, help="uid to drop to first (root only)")
    ap.add_argument("--wall-s", type=float, default=30)
    ap.add_argument("--memory-mb", type=int, default=1024)
    ap.add_argument("--network", action="store_true")
    args = ap.parse_args()
    limits = SandboxLimits(wall_s=args.wall_s, memory_mb=args.memory_mb, network=args.network)
    argv = render_bwrap_argv(sandbox_python(), args.runner_dir, args.workdir, uid=args.uid, gid=args.uid,
                             limits=limits, env=render_env(limits), ro_paths=site_packages(), evaluator=None)
    print(" \\\n  ".join(shlex.quote(a) for a in argv))


if __name__ == "__main__":
    main()
