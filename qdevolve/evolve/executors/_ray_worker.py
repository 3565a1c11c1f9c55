"""The Ray actor behind the ``ray`` executor: one per worker slot, one evaluation at a time.

It lives in a Ray worker process on some node of the cluster and keeps that slot's sandbox
warm (staging directory, uid pool, template processes where the backend has them) from one
evaluation to the next. The controller sends the evaluator and ``--plugin`` files as bytes
the first time this actor needs them (keyed by SHA-256); the actor writes them under its own
directory and loads the plugin files before it builds a sandbox. Nothing here imports Ray at
module level, so the module is importable (and testable) without a cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from qdevolve.types import EvalResult, Program

__all__ = ["SandboxWorker", "FileBlob"]

FileBlob = tuple[str, bytes]  # (file name, content), sent once per actor and SHA-256


class SandboxWorker:
    """Holds warm sandboxes for one worker slot (keyed by the sandbox spec)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="qdevolve-ray-"))  # evaluator/plugin copies
        self.files: dict[str, Path] = {}        # sha256 -> local copy
        self.plugins: set[str] = set()          # sha256 of plugin files already loaded
        self.sandboxes: dict[str, Any] = {}     # canonical spec JSON -> sandbox object
        self.worker = f"ray:{_node_id()}:{os.getpid()}"

    def identity(self) -> str:
        """``ray:<node id>:<pid>``; also the readiness probe after the actor is placed."""
        return self.worker

    def evaluate(self, program: Program, evaluator: str | None, files: dict[str, FileBlob],
                 sandbox: dict[str, Any], limits: Any, cascade: list[float] | None,
                 plugins: tuple[str, ...]) -> tuple[EvalResult, str]:
        """Run one evaluation; returns ``(result, worker)``.

        Args:
            program: The candidate.
            evaluator: SHA-256 of the evaluator file (its bytes are in ``files`` or were sent
                earlier), or ``None`` to run the program as ``__main__``.
            files: New files for this actor, ``sha256 -> (name, bytes)``.
            sandbox: Registry spec of the sandbox (``{"type": "bwrap", ...}``; ``auto`` picks
                the best backend available on this node).
            limits: ``SandboxLimits`` of this evaluation.
            cascade: Cascade thresholds, or ``None``.
            plugins: SHA-256 of each ``--plugin`` file to load first, in order.
        """
        for sha, (name, data) in files.items():
            self._store(sha, name, data)
        for sha in plugins:
            self._load_plugin(sha)
        box = self._sandbox(sandbox)
        ev_path = None if evaluator is None else self._path(evaluator)
        try:
            result = box.evaluate(program, ev_path, limits, cascade_thresholds=cascade)
        except Exception as exc:  # a sandbox bug must not lose the program (as the local executor)
            result = EvalResult(status="error",
                                error=f"sandbox failure on {self.worker}: {type(exc).__name__}: {exc}")
        return result, self.worker

    def shutdown(self) -> None:
        """Close the sandboxes and remove this actor's files."""
        for box in self.sandboxes.values():
            try:
                box.close()
            except Exception:  # cleanup must go on for the others
                pass
        self.sandboxes.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- helpers ------------------------------------------------------------------------
    def _store(self, sha: str, name: str, data: bytes) -> None:
        if sha in self.files:
            return
        d = self.root / sha[:16]
        d.mkdir(exist_ok=True)
        path = d / Path(name).name  # the evaluator keeps its file name (tracebacks, imports)
        path.write_bytes(data)
        self.files[sha] = path

    def _path(self, sha: str) -> Path:
        try:
            return self.files[sha]
        except KeyError:
            raise RuntimeError(f"{self.worker}: file {sha[:12]} was never sent to this worker") from None

    def _load_plugin(self, sha: str) -> None:
        if sha in self.plugins:
            return
        from qdevolve import registry

        registry.load_plugin_file(self._path(sha))
        self.plugins.add(sha)

    def _sandbox(self, spec: dict[str, Any]) -> Any:
        key = json.dumps(spec, sort_keys=True, default=str)
        box = self.sandboxes.get(key)
        if box is None:
            from qdevolve import registry
            from qdevolve.sandbox import resolve_sandbox

            box = self.sandboxes[key] = registry.sandbox.create(resolve_sandbox(spec))
        return box


def _node_id() -> str:
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:  # outside a Ray worker (unit use): the host name stands in
        import socket

        return socket.gethostname()
