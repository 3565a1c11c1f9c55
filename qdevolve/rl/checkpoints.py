"""Policy versions on disk and in the store: where weights go, how a version is saved and loaded.

A version is a directory plus a ``policy_versions`` row recording the path, step, objective
and metrics. Two kinds of directory (:mod:`qdevolve.backends.adapters`):

* **adapter** (a LoRA run): ``adapter_config.json`` and ``adapter_model.safetensors`` (the
  adapter only, a few MB) and ``qdevolve_version.json`` naming the base by directory and
  content hash. A base that was not loaded from a directory (a model built in memory) is
  saved once, as ``<checkpoint root>/base``, and named.
* **full** (full fine-tuning, e.g. the tiny GPT-2 policies): ``save_pretrained`` of the model
  and tokenizer, with ``qdevolve_version.json`` of kind ``full``.

``trainer_state.pt`` (optimiser moments, the reference policy (its adapter only in a LoRA run),
the generator) sits beside the weights; resume continues from the latest version, so a LoRA
run keeps it only with its latest version (the previous one's is removed once the new row is
committed: the moments alone are twice the adapter's size). The row is written atomically with
the run state ``trainer`` (and any extra state the caller passes, e.g. the joined loop's
``last_seq``), so a kill leaves either the whole version or none.

Where the weights go (:func:`policy_dir`), first match wins:

1. the run's ``train.checkpoint_dir`` (config), as ``<checkpoint_dir>/<run id>/v<N>``;
2. a SQLite file: beside it, ``<db stem>.policies/<run id>/v<N>``;
3. a database URL (PostgreSQL...): ``archives/<run name>.policies/<run id>/v<N>`` under the
   current directory when ``archives/`` exists there, else
   ``~/.cache/qdevolve/policies/<database host>/<run id>/v<N>`` (``XDG_CACHE_HOME`` honoured).

The path is made absolute before it is stored, so a later ``resume`` or ``serve`` from
another directory finds it.

A path the database names is an adversary's choice (a database can be handed over), so
``trainer_state.pt`` holds plain data only (tensors, dicts, lists, tuples, numbers, strings:
optimizer state, reference weights, the generator's state as a byte tensor) and is read with
``torch.load(..., weights_only=True)``: a file whose unpickling would build anything else
(a ``__reduce__`` calling a function) is refused with an error naming it, never executed.
Weights load from safetensors only (``use_safetensors=True``; adapters through
:func:`qdevolve.backends.adapters.attach_adapter`, which treats ``adapter_config.json`` as
data), never with ``trust_remote_code``; an adapter whose recorded base does not match the base
found (or given) is refused with an error naming the run, the version and both identities.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from qdevolve.backends.adapters import (
    BaseIdentity,
    VersionMeta,
    attach_adapter,
    base_identity,
    check_base,
    read_meta,
    save_adapter,
    version_kind,
    write_meta,
)
from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError, DatabaseError

__all__ = ["checkpoint_root", "policy_dir", "save_version", "load_version", "LoadedVersion", "load_trainer_state",
           "plain_state", "export_version", "ensure_base", "is_adapter_model", "load_model_dir"]


def checkpoint_root(store: LineageStore, run_id: str) -> Path:
    """The folder holding every version of ``run_id`` (module docstring: the three rules)."""
    try:
        run = store.get_run(run_id)
    except DatabaseError:  # a trainer on a run id the store has no row for
        run = {"name": run_id, "config": {}}
    configured = ((run.get("config") or {}).get("train") or {}).get("checkpoint_dir")
    if configured:
        return Path(os.path.expanduser(str(configured))).absolute() / run_id
    if store.path is not None:
        return store.path.absolute().parent / f"{store.path.stem}.policies" / run_id
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(run.get("name") or run_id))[:100] or run_id
    if Path("archives").is_dir():
        return Path("archives").absolute() / f"{name}.policies" / run_id
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "qdevolve" / "policies"
    host = re.sub(r"[^A-Za-z0-9_.-]+", "_", getattr(store.engine.url, "host", None) or "db")
    return cache / host / run_id


def policy_dir(store: LineageStore, run_id: str, version: int) -> Path:
    """Where version ``version`` of ``run_id`` is saved: ``checkpoint_root(...)/v<version>``."""
    return checkpoint_root(store, run_id) / f"v{version}"


def is_adapter_model(model: Any) -> bool:
    """True for a PEFT-wrapped model (its versions are saved as adapters)."""
    return hasattr(model, "peft_config") and callable(getattr(model, "get_base_model", None))


def ensure_base(store: LineageStore, run_id: str, model: Any, tokenizer: Any) -> BaseIdentity:
    """The identity of a LoRA model's base that no directory holds (built or changed in memory):
    saved once as ``<checkpoint root>/base`` (model and tokenizer), reused when it is already there
    with the same weights.

    Raises:
        ConfigError: ``<checkpoint root>/base`` holds a different model.
    """
    from qdevolve.backends.adapters import _weights_equal

    target = checkpoint_root(store, run_id) / "base"
    plain = copy.deepcopy(model).unload()  # the base alone: LoRA layers removed from a copy
    if (target / "config.json").is_file():
        if not _weights_equal(plain, target):
            raise ConfigError(f"{target}: holds another base than run {run_id[:12]}'s model; move it away "
                              "or set train.checkpoint_dir")
    else:
        target.mkdir(parents=True, exist_ok=True)
        _without_gguf_marker(plain).save_pretrained(target)
        tokenizer.save_pretrained(target)
    return base_identity(target)


def save_version(store: LineageStore, run_id: str, *, version: int, parent: int | None, model: Any, tokenizer: Any,
                 trainer_state: dict[str, Any], objective: str, step: int, merge_lora: bool = False,
                 base: BaseIdentity | None = None, metrics: dict[str, Any] | None = None,
                 path: str | Path | None = None, extra_state: dict[str, Any] | None = None) -> Path:
    """Write the version directory and trainer state, then the version row (one transaction).

    A PEFT model is saved as an adapter of ``base`` (default: :func:`ensure_base`), unless
    ``merge_lora`` asks for a merged full model; any other model as a full directory.
    """
    target = (Path(path) if path is not None else policy_dir(store, run_id, version)).absolute()
    target.mkdir(parents=True, exist_ok=True)
    adapter = is_adapter_model(model) and not merge_lora
    if adapter:
        base = base or ensure_base(store, run_id, model, tokenizer)
        save_adapter(model, target)
        write_meta(target, VersionMeta("adapter", run_id, version, base))
    else:
        base = None
        plain = copy.deepcopy(model).merge_and_unload() if is_adapter_model(model) else model
        _without_gguf_marker(plain).save_pretrained(target)
        tokenizer.save_pretrained(target)
        write_meta(target, VersionMeta("full", run_id, version))
    torch.save(plain_state(trainer_state), target / "trainer_state.pt")
    kind = "adapter" if adapter else "full"
    state = {"trainer": {"version": version, "global_step": step, "path": str(target), "objective": objective,
                         "kind": kind, "base": None if base is None else base.to_dict()},
             **(extra_state or {})}
    previous = _row(store, run_id, parent) if adapter and parent is not None else None
    store.add_policy_version(run_id, version, objective=objective, parent_version=parent, step=step,
                             path=str(target), metrics=metrics or {}, state=state)
    if previous is not None and Path(previous["path"]).absolute() != target:
        stale = Path(previous["path"]) / "trainer_state.pt"
        if stale.is_file() and (Path(previous["path"]) / "adapter_config.json").is_file():
            stale.unlink()  # resume continues from the latest version (module docstring)
    return target


def _row(store: LineageStore, run_id: str, version: int | None) -> dict[str, Any] | None:
    rows = store.policy_versions(run_id)
    if version is None:
        return rows[-1] if rows else None
    return next((r for r in rows if r["version"] == version), None)


@dataclass
class LoadedVersion:
    """A stored version: its row, model, tokenizer, trainer state (``None`` if absent), kind and base."""

    row: dict[str, Any]
    model: Any
    tokenizer: Any
    trainer_state: dict[str, Any] | None
    kind: str = "full"
    base: BaseIdentity | None = None

    @property
    def version(self) -> int:
        return int(self.row["version"])


def _tokenizer(path: str | Path) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model_dir(path: str | Path) -> Any:
    """A full model directory as a float32 model: safetensors only, no remote code, no hub."""
    from transformers import AutoModelForCausalLM

    from qdevolve.backends.models import offline_hub

    with offline_hub():
        try:
            return AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, use_safetensors=True,
                                                        trust_remote_code=False)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot load this model directory (safetensors weights only): "
                              f"{str(exc).splitlines()[0][:200]}") from None


def load_version(store: LineageStore, run_id: str, version: int | None = None, *, base: str | Path | None = None,
                 trainable: bool = False) -> LoadedVersion:
    """Load a stored version (the latest by default), either kind.

    An adapter version is applied to ``base`` (a model directory; default: the base its
    ``qdevolve_version.json`` records), after checking that base's content hash against the
    recorded one; ``trainable`` leaves the adapter's parameters trainable (resume).

    Raises:
        ConfigError: no such version; the directory is not a version; the base does not match.
    """
    rows = store.policy_versions(run_id)
    if not rows:
        raise ConfigError(f"run {run_id} has no policy versions in {store.target}")
    row = _row(store, run_id, version)
    if row is None:
        raise ConfigError(f"run {run_id} has no policy version {version}; it has "
                          f"{', '.join(str(r['version']) for r in rows)}")
    path = Path(row["path"])
    if not path.is_dir():
        raise ConfigError(f"run {run_id[:12]} policy version {row['version']}: {path} is not a directory "
                          "(moved or deleted?)")
    kind = version_kind(path)
    identity = None
    if kind == "adapter":
        meta = read_meta(path)
        if meta is None or meta.base is None:
            raise ConfigError(f"run {run_id[:12]} policy version {row['version']}: {path} is an adapter without "
                              "qdevolve_version.json naming its base")
        base_dir = Path(base) if base is not None else Path(meta.base.path)
        if base is None and not (base_dir / "config.json").is_file():
            raise ConfigError(f"run {run_id[:12]} policy version {row['version']} is an adapter of base "
                              f"{meta.base.describe()}, and that directory is gone; pass the base's new directory "
                              "(load_version(..., base=DIR), qdevolve policy export --base DIR)")
        identity = base_identity(base_dir)
        check_base(meta, identity, directory=path, run_id=run_id, version=int(row["version"]))
        model = attach_adapter(load_model_dir(base_dir), path, name="default", trainable=trainable)
        tokenizer = _tokenizer(base_dir)
    else:
        model, tokenizer = load_model_dir(path), _tokenizer(path)
    state_file = path / "trainer_state.pt"
    state = load_trainer_state(state_file) if state_file.is_file() else None
    return LoadedVersion(row, model, tokenizer, state, kind, identity)


def _without_gguf_marker(model: Any) -> Any:
    """``model`` as a plain model when its config still carries a ``gguf`` quantization config
    over plain float weights (a directory converted from a GGUF, such as a prepared known model):
    transformers refuses to ``save_pretrained`` such a model, so its weights are copied into a
    model built from the config without the marker."""
    qc = getattr(model.config, "quantization_config", None)
    method = qc.get("quant_method") if isinstance(qc, dict) else getattr(qc, "quant_method", None)
    if qc is None or "gguf" not in str(method).lower():
        return model
    config = copy.deepcopy(model.config)
    del config.quantization_config
    plain = type(model)(config)
    plain.load_state_dict(model.state_dict())
    return plain.to(dtype=next(model.parameters()).dtype)


def export_version(store: LineageStore, run_id: str, version: int | None, out: str | Path, *,
                   base: str | Path | None = None) -> Path:
    """Write version ``version`` (latest: ``None``) of ``run_id`` as a plain, merged Hugging Face
    directory ``out`` (model and tokenizer; an adapter merged into its base, found where the
    version records it or at ``base``, hash-checked either way).

    Raises:
        ConfigError: ``out`` exists and is not an empty directory.
    """
    target = Path(out).absolute()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ConfigError(f"{target}: exists and is not an empty directory; choose a new --out")
    loaded = load_version(store, run_id, version, base=base)
    model = loaded.model.merge_and_unload() if loaded.kind == "adapter" else loaded.model
    model = _without_gguf_marker(model)
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    loaded.tokenizer.save_pretrained(target)
    return target


_PLAIN = (bool, int, float, str, bytes, type(None), torch.Tensor)


def plain_state(state: Any, where: str = "trainer_state") -> Any:
    """``state`` checked to be what a ``weights_only=True`` load accepts (tensors, dicts, lists,
    tuples, numbers, strings, None); anything else is a ``ConfigError`` naming its key path, so
    a checkpoint that could not be resumed safely is never written."""
    if isinstance(state, dict):
        return {k: plain_state(v, f"{where}[{k!r}]") for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(plain_state(v, f"{where}[{i}]") for i, v in enumerate(state))
    if isinstance(state, _PLAIN):
        return state
    raise ConfigError(f"{where} is a {type(state).__name__}: trainer_state.pt holds plain data only "
                      "(tensors, dicts, lists, numbers, strings) so resume can load it with weights_only=True")


def load_trainer_state(path: Path) -> dict[str, Any]:
    """Read ``trainer_state.pt`` with ``weights_only=True``; a file that is not plain data (a pickle
    that would build objects or call functions) is refused, naming the file, and never executed."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # UnpicklingError for a forbidden global; anything else is a broken file
        raise DatabaseError(f"{path}: refused to load this trainer state: it is not a plain-data checkpoint "
                            f"(weights_only=True load failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}). "
                            "A database or run directory may name any file; only tensors, dicts, lists, numbers "
                            "and strings are accepted. Delete the file to resume from the weights alone.") from None
    if not isinstance(state, dict):
        raise DatabaseError(f"{path}: a trainer state is a dict, this file holds a {type(state).__name__}")
    return state
