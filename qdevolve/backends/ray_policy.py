"""Backend ``ray_policy``: one generation backend served by a named Ray actor, shared by controllers.

With ``--executor ray`` the model that proposes mutations can live on the cluster too: a
*policy server* actor (a detached, named Ray actor) holds the real backend (``transformers``
on CPU, ``vllm`` on a GPU node) and every controller that names the same actor samples from
it. The joined trainer (:class:`qdevolve.evolve.training.joined.JoinedListener`) updates it after each
step: :meth:`RayPolicyBackend.load_policy` pushes the new weights through the Ray object
store (``transfer: weights``, the default for ``transformers``: the state dict read from the
saved version is ``ray.put`` once and loaded by the actor, no shared file system needed) or
hands the actor the version's directory (``transfer: path``, the default for ``vllm``, whose
engine loads weights or LoRA adapters from disk: the GPU node must see the path). From the
moment ``load_policy`` returns, every controller's next completion comes from the new
version, and each completion carries the version that sampled it (``policy_version``, stored
on the rollout and the program). A LoRA run's versions are adapter directories: the actor
serves their base and switches adapters in place; with ``transfer: weights`` an adapter
travels as its own files (a few MB), written to a directory of the actor's node.

Versions only move forward: the actor ignores a version lower than the one it serves (a
late push from a slow controller never rolls the policy back).

Config (joined runs: ``train.backend``; other runs: ``backend``)::

    train:
      backend: {placement: ray, actor: exp7-policy, resources: {side: 1}}
    backend: {type: ray_policy, actor: exp7-policy}   # a second controller sharing it

``placement: ray`` makes the joined run serve its policy from the actor
(``qdevolve-policy-<run id>`` unless ``actor`` names one). The actor outlives the
controllers (detached) so several runs can share it; stop it with
:func:`stop_policy_actor` or ``ray kill``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from pathlib import Path
from typing import Any

from qdevolve import registry
from qdevolve.backends.adapters import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    VERSION_FILE,
    read_meta,
    version_kind,
)
from qdevolve.backends.base import Completion, GenerationRequest
from qdevolve.errors import ConfigError, RunAborted

__all__ = ["RayPolicyBackend", "PolicyServer", "stop_policy_actor", "NAMESPACE"]

NAMESPACE = "qdevolve"  # every policy actor lives in this Ray namespace
log = logging.getLogger("qdevolve.backend.ray_policy")


class PolicyServer:
    """The actor's body: builds the inner backend on its node and serves it.

    Args:
        inner: Spec of the served backend (``{"type": "transformers", "model": DIR, ...}``).
        version: The policy version the model directory holds (``None``: a fixed model).
    """

    def __init__(self, inner: dict[str, Any], version: int | None) -> None:
        import qdevolve.backends.transformers_backend  # noqa: F401  registers 'transformers'

        if inner.get("type") == "vllm":
            import qdevolve.backends.vllm_backend  # noqa: F401
        self.backend = registry.backend.create(dict(inner))
        self.backend.policy_version = version
        self.served = 0  # completions served, all controllers together

    async def generate(self, requests: list[GenerationRequest]) -> list[list[Completion]]:
        out = await self.backend.generate(requests)
        self.served += sum(len(o) for o in out)
        return out

    def load_weights(self, version: int, state: dict[str, Any]) -> int:
        """Load a full state dict (in place, same architecture); returns the version served."""
        current = self.backend.policy_version
        if current is not None and version < current:
            return current
        import torch

        model = self.backend.model
        with self.backend._lock, torch.no_grad():
            missing, unexpected = model.load_state_dict(state, strict=False)
            tied = {k for k in missing if "lm_head" in k or "embed" in k}  # tied weights are saved once
            if unexpected or set(missing) - tied:
                raise ValueError(f"policy version {version}: weights do not fit the served model "
                                 f"(missing {sorted(set(missing) - tied)[:5]}, unexpected {sorted(unexpected)[:5]})")
            if hasattr(model, "tie_weights"):
                model.tie_weights()
        self.backend.policy_version = version
        return version

    def load_adapter_files(self, version: int, files: dict[str, bytes]) -> int:
        """An adapter version sent as its files' bytes (``transfer: weights``): written to a
        temporary directory of this node's own and loaded by the inner backend (validated there,
        as any adapter directory is); returns the version served."""
        import tempfile

        current = self.backend.policy_version
        if current is not None and version < current:
            return current
        allowed = {ADAPTER_CONFIG, ADAPTER_WEIGHTS, VERSION_FILE}
        if not set(files) <= allowed or ADAPTER_CONFIG not in files:
            raise ValueError(f"policy version {version}: adapter files must be among {sorted(allowed)}, "
                             f"got {sorted(files)[:5]}")
        with tempfile.TemporaryDirectory(prefix=f"qdevolve-adapter-v{version}-") as tmp:
            for name, data in files.items():
                (Path(tmp) / name).write_bytes(data)
            self.backend.load_policy(version, tmp)  # the tensors are in memory once loaded
        return version

    def load_policy(self, version: int, path: str | None) -> int:
        """The inner backend's own ``load_policy`` (a directory this node can read)."""
        current = self.backend.policy_version
        if current is not None and version < current:
            return current
        self.backend.load_policy(version, path)
        return version

    def info(self) -> dict[str, Any]:
        import ray

        return {"version": self.backend.policy_version, "served": self.served, "pid": os.getpid(),
                "host": socket.gethostname(), "node": ray.get_runtime_context().get_node_id()}


def _ray(address: str | None, timeout_s: float) -> Any:
    """``ray``, connected: reuses the executor's connection, else connects to ``address``."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("backend 'ray_policy' needs the ray package: pip install 'qdevolve[ray]'") from exc
    if ray.is_initialized():
        return ray
    from qdevolve.backends.ray_address import probe, resolve_address

    target = address or "auto"
    if not target.startswith("ray://"):
        target = resolve_address(target)
        why = probe(target, timeout_s)
        if why:
            raise RunAborted(f"backend ray_policy: cannot reach the Ray cluster at {target} ({why}); "
                             "pass backend.address HOST:PORT or run with --executor ray --ray-address HOST:PORT")
    ray.init(address=target, logging_level=logging.ERROR, log_to_driver=False, configure_logging=False)
    return ray


@registry.backend("ray_policy")
class RayPolicyBackend:
    """A client of a shared policy-server actor (module docstring).

    Args:
        actor: The actor's name (in namespace ``qdevolve``); created when it does not exist.
        model: What the actor serves when it creates the backend: a model directory its node
            can read (or, from Python, a loaded model object, sent through the object store;
            ``inner`` then holds its ``tokenizer``). Not needed to join an existing actor.
        inner: The served backend: ``transformers`` (default) or ``vllm``, or a spec dict with
            its options (``{type: vllm, lora: true, engine_kwargs: {...}}``).
        version: Policy version ``model`` holds.
        address: Ray head ``HOST:PORT`` when the controller is not connected yet (``auto``).
        num_cpus, num_gpus, resources: What the actor reserves (``num_gpus: 1`` for vllm).
        transfer: ``weights`` (object store) or ``path`` (a directory the actor reads).
        connect_timeout_s: How long to wait for the head and for the actor to start.
    """

    name = "ray_policy"

    def __init__(self, *, actor: str, model: Any = None, inner: str | dict[str, Any] = "transformers",
                 version: int | None = None, address: str | None = None, num_cpus: float = 1.0,
                 num_gpus: float = 0.0, resources: dict[str, float] | None = None, transfer: str | None = None,
                 connect_timeout_s: float = 120.0) -> None:
        spec = {"type": inner} if isinstance(inner, str) else dict(inner)
        if spec.get("type") not in ("transformers", "vllm"):
            raise ConfigError(f"backend ray_policy: inner must be 'transformers' or 'vllm', got {spec.get('type')!r}")
        self.transfer = transfer or ("weights" if spec["type"] == "transformers" else "path")
        if self.transfer not in ("weights", "path"):
            raise ConfigError(f"backend ray_policy: transfer must be 'weights' or 'path', got {self.transfer!r}")
        self.actor_name, self.inner_type = str(actor), spec["type"]
        ray = self._ray = _ray(address, min(connect_timeout_s, 15.0))
        try:
            self.handle = ray.get_actor(self.actor_name, namespace=NAMESPACE)
        except ValueError:  # not there yet: create it (get_if_exists settles a race between controllers)
            if model is None and "model" not in spec:
                raise ConfigError(f"backend ray_policy: no actor {self.actor_name!r} on the cluster and no "
                                  "model= to start one with") from None
            if model is not None:
                spec.setdefault("model", str(model) if isinstance(model, Path) else model)
            cls = ray.remote(PolicyServer).options(
                name=self.actor_name, namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
                num_cpus=num_cpus, num_gpus=num_gpus, resources=dict(resources or {}),
                max_concurrency=4)
            self.handle = cls.remote(spec, version)
        try:
            info = ray.get(self.handle.info.remote(), timeout=connect_timeout_s)
        except Exception as exc:
            raise RunAborted(f"backend ray_policy: actor {self.actor_name!r} did not start within "
                             f"{connect_timeout_s:g} s: {type(exc).__name__}: {str(exc)[:300]}") from exc
        self.policy_version: int | None = info["version"]
        log.info("policy actor %s on %s (pid %s) serves version %s", self.actor_name, info["host"], info["pid"],
                 info["version"])

    def __repr__(self) -> str:
        return f"RayPolicyBackend(actor={self.actor_name!r}, policy_version={self.policy_version})"

    async def generate(self, requests: list[GenerationRequest]) -> list[list[Completion]]:
        """The actor's completions (each carries the version that sampled it)."""
        try:
            out = await self.handle.generate.remote(requests)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the actor died or the cluster went away: the run cannot go on
            raise RunAborted(f"backend ray_policy: actor {self.actor_name!r} failed: {type(exc).__name__}: "
                             f"{str(exc)[:300]}") from exc
        versions = [c.policy_version for o in out for c in o if c.policy_version is not None]
        if versions:
            self.policy_version = max(versions)
        return out

    def load_policy(self, version: int, path: str | None) -> None:
        """Make the actor serve ``version`` (saved at ``path``) before returning."""
        if path is None:
            raise ConfigError(f"backend ray_policy: policy version {version} has no saved directory to load")
        if self.transfer == "path":
            served = self._ray.get(self.handle.load_policy.remote(version, str(path)))
        elif version_kind(path) == "adapter":  # a few MB: the adapter's own files, loaded in place there
            files = {n: (Path(path) / n).read_bytes() for n in (ADAPTER_CONFIG, ADAPTER_WEIGHTS, VERSION_FILE)
                     if (Path(path) / n).is_file()}
            served = int(self._ray.get(self.handle.load_adapter_files.remote(version, files)))
        else:
            served = self.push_weights(version, read_state_dict(path))
        self.policy_version = served

    def push_weights(self, version: int, state: dict[str, Any]) -> int:
        """Put ``state`` in the object store once and have the actor load it; the version served."""
        ref = self._ray.put({k: v.detach().cpu() for k, v in state.items()})
        return int(self._ray.get(self.handle.load_weights.remote(version, ref)))

    def info(self) -> dict[str, Any]:
        """Version served, completions served, and where the actor runs."""
        return self._ray.get(self.handle.info.remote())

    def close(self) -> None:
        """Nothing: the actor is shared and outlives this controller (:func:`stop_policy_actor`)."""


def read_state_dict(path: str | Path) -> dict[str, Any]:
    """The weights of a full ``save_pretrained`` directory (safetensors, else ``pytorch_model.bin``,
    read with ``weights_only=True``); an adapter directory is refused (it is sent as its files)."""
    p = Path(path)
    if version_kind(p) == "adapter":
        raise ConfigError(f"backend ray_policy: {p} is a LoRA adapter, not a full model's weights")
    shards = sorted(p.glob("*.safetensors"))
    if shards:
        from safetensors.torch import load_file

        state: dict[str, Any] = {}
        for f in shards:
            state.update(load_file(str(f)))
        return state
    import torch

    bins = sorted(p.glob("pytorch_model*.bin"))
    if not bins:
        raise ConfigError(f"backend ray_policy: {p} holds no weights (*.safetensors or pytorch_model*.bin)")
    state = {}
    for f in bins:
        state.update(torch.load(f, map_location="cpu", weights_only=True))
    return state


def _base_dir(path: str | None) -> str | None:
    """The model directory a version is served from: an adapter version's recorded base, else itself."""
    if path is None or version_kind(path) != "adapter":
        return path
    meta = read_meta(path)
    if meta is None or meta.base is None:
        raise ConfigError(f"{path}: an adapter version without qdevolve_version.json naming its base")
    return meta.base.path


def stop_policy_actor(actor: str) -> bool:
    """Kill the named policy actor; False when there is none (call with Ray connected)."""
    import ray

    try:
        handle = ray.get_actor(actor, namespace=NAMESPACE)
    except ValueError:
        return False
    ray.kill(handle)
    return True


def joined_backend(listener: Any, policy: str) -> RayPolicyBackend:
    """The joined run's backend with ``train.backend.placement: ray``: the run's policy actor
    (``actor`` option, default ``qdevolve-policy-<run id>``), started from the trainer's current
    version and brought to it when it already serves an older one (a resumed run).

    A new ``transformers`` actor receives the trainer's model object through the object store
    (no shared file system); with LoRA, or ``transfer: path``, it loads the version's directory.
    """
    opts = {k: v for k, v in listener.settings.backend.items() if k != "placement"}
    trainer = listener.trainer
    version, path = trainer.version, listener._path_of(trainer.version)
    inner = opts.pop("inner", None) or {"type": "vllm" if policy.startswith("vllm:") else "transformers"}
    inner = {"type": inner} if isinstance(inner, str) else dict(inner)
    start: int | None = version
    if inner["type"] == "vllm":
        inner.setdefault("model", policy.split(":", 1)[1] if policy.startswith("vllm:") else _base_dir(path))
        start = None  # the engine loads the version below, as the in-process vllm backend does
    elif opts.get("transfer", "weights") == "weights" and not trainer.config.use_lora:
        import copy

        inner.setdefault("model", copy.deepcopy(trainer.model).cpu())
        inner.setdefault("tokenizer", trainer.tokenizer)
    else:  # LoRA versions are adapters: the actor loads their base, then the version over it
        inner.setdefault("model", _base_dir(path))
        if path is not None and version_kind(path) == "adapter":
            start = None
    backend = RayPolicyBackend(actor=opts.pop("actor", None) or f"qdevolve-policy-{listener.run_id[:12]}",
                               inner=inner, version=start, **opts)
    if backend.policy_version != version and path is not None:
        backend.load_policy(version, path)
    return backend
