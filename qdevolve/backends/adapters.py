"""Policy-version directories: what one holds, which base it fits, and how it is read safely.

A version of a LoRA run is an *adapter directory* (PEFT's layout, which vLLM reads too)::

    adapter_config.json         r, lora_alpha, target_modules, fan_in_fan_out, ... (LoRA config)
    adapter_model.safetensors   the adapter tensors only: lora_A / lora_B of each adapted layer
    qdevolve_version.json       {"format": 1, "kind": "adapter", "run_id", "version",
                                 "base": {"path", "name", "sha256"}}

a few MB instead of the whole model; the base is named, not copied. A version of a full
fine-tuning run is a ``save_pretrained`` directory with ``qdevolve_version.json`` of kind
``full`` (no base). ``trainer_state.pt`` may sit beside either (:mod:`qdevolve.rl.checkpoints`).

**The base's identity** (:class:`BaseIdentity`) is its directory, its known-model name when it
is a prepared model, and a content hash: sha256 over ``config.json`` and every safetensors
file (name, size and sha256 of the bytes; memoised per path, size and mtime). An adapter is
only ever applied to a base whose hash equals the one it records
(:func:`check_base`), so a version can never silently load over a different or re-prepared
base. :func:`identity_of_model` names the base of an in-memory model: its
``config._name_or_path`` directory, provided the model's weights equal that directory's.

**Trust.** A directory a database names is an adversary's choice. Nothing here hands it to
PEFT's or transformers' own loaders: ``adapter_config.json`` is data, parsed as JSON, of which
only LoRA's shape fields are used (:func:`read_adapter_config`: names of a base or a class,
``base_model_name_or_path``, ``revision``, ``auto_mapping``, are ignored, never looked up; a
field that would change what is loaded or import a module, such as ``megatron_config`` /
``megatron_core``, ``modules_to_save`` or ``layers_to_transform``, set to anything but its
empty default is refused), its target names must
be projection layers of the base in the base's own weight layout, the weights are read from
``adapter_model.safetensors`` only (a pickled ``.bin`` is refused), and their names and shapes
are checked against the injected adapter before a tensor is read.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qdevolve.errors import ConfigError

__all__ = ["ADAPTER_CONFIG", "ADAPTER_WEIGHTS", "VERSION_FILE", "BaseIdentity", "VersionMeta", "base_identity",
           "identity_of_model", "read_meta", "write_meta", "version_kind", "check_base", "read_adapter_config",
           "attach_adapter", "save_adapter", "base_model_of"]

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
VERSION_FILE = "qdevolve_version.json"
FORMAT = 1

_HASHES: dict[tuple[str, int, int], str] = {}  # (resolved path, size, mtime_ns) -> sha256


@dataclass(frozen=True)
class BaseIdentity:
    """A base model: its directory, known-model name (``None`` for any other directory), content hash."""

    path: str
    sha256: str
    name: str | None = None

    def describe(self) -> str:
        label = f"{self.name} at {self.path}" if self.name else self.path
        return f"{label} (sha256 {self.sha256[:16]})"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "name": self.name, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, d: Any, where: str) -> BaseIdentity:
        if not isinstance(d, dict) or not isinstance(d.get("path"), str) or \
                not re.fullmatch(r"[0-9a-f]{64}", str(d.get("sha256", ""))) or \
                not isinstance(d.get("name"), (str, type(None))):
            raise ConfigError(f"{where}: 'base' must be {{path: str, name: str|null, sha256: 64 hex digits}}")
        return cls(path=d["path"], sha256=d["sha256"], name=d["name"])


def _file_sha(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]


def base_identity(path: str | Path, name: str | None = None) -> BaseIdentity:
    """The identity of the model directory ``path`` (module docstring).

    ``name`` defaults to the directory's name when it is a prepared known model (it holds
    qdevolve's ``.qdevolve-prepared`` marker), else ``None``.

    Raises:
        ConfigError: ``path`` is not a directory holding ``config.json`` and safetensors weights.
    """
    p = Path(path).expanduser().absolute()
    config = p / "config.json"
    weights = sorted(list(p.glob("*.safetensors")) + list(p.glob("*.safetensors.index.json")))
    weights = [w for w in weights if w.name != ADAPTER_WEIGHTS]
    if not config.is_file() or not weights:
        raise ConfigError(f"{p}: not a Hugging Face model directory with safetensors weights (config.json and "
                          "*.safetensors); a base model must be one")
    h = hashlib.sha256()
    for f in [config, *weights]:
        h.update(f"{f.name}\0{f.stat().st_size}\0{_file_sha(f)}\n".encode())
    if name is None and (p / ".qdevolve-prepared").is_file():
        name = p.name
    return BaseIdentity(path=str(p), sha256=h.hexdigest(), name=name)


def base_model_of(model: Any) -> Any:
    """The transformers model under a ``PeftModel`` (``model`` itself otherwise)."""
    get = getattr(model, "get_base_model", None)
    return get() if callable(get) and hasattr(model, "peft_config") else model


def _weights_equal(model: Any, path: Path) -> bool:
    """True when every tensor of ``path``'s safetensors equals ``model``'s (cast to its dtype),
    and every model tensor absent from the files is tied to one that is present."""
    import torch
    from safetensors import safe_open

    state = model.state_dict()
    seen: set[int] = set()
    for f in sorted(path.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            for key in st.keys():
                mine = state.get(key)
                if mine is None:
                    return False
                theirs = st.get_tensor(key)
                if theirs.shape != mine.shape or not torch.equal(theirs.to(mine.dtype), mine.detach().cpu()):
                    return False
                seen.add(mine.data_ptr())
    return all(t.data_ptr() in seen for t in state.values())


def identity_of_model(model: Any) -> BaseIdentity | None:
    """The identity of an in-memory model's base: its ``config._name_or_path`` directory, when
    that directory's weights equal the model's; ``None`` otherwise (built from a config, loaded
    from elsewhere, or changed since it was loaded)."""
    base = base_model_of(model)
    if hasattr(base, "peft_config"):  # LoRA layers injected: the weights no longer read as the file's
        return None
    name = str(getattr(getattr(base, "config", None), "_name_or_path", "") or "")
    if not name or not (Path(name) / "config.json").is_file():
        return None
    try:
        identity = base_identity(name)
    except ConfigError:
        return None
    return identity if _weights_equal(base, Path(identity.path)) else None


@dataclass(frozen=True)
class VersionMeta:
    """``qdevolve_version.json``: the kind of a version directory, whose version it is, its base."""

    kind: str  # "adapter" or "full"
    run_id: str | None = None
    version: int | None = None
    base: BaseIdentity | None = None

    def label(self) -> str:
        run = self.run_id[:12] if self.run_id else "?"
        return f"run {run} policy version {self.version if self.version is not None else '?'}"


def write_meta(directory: Path, meta: VersionMeta) -> None:
    data = {"format": FORMAT, "kind": meta.kind, "run_id": meta.run_id, "version": meta.version,
            "base": None if meta.base is None else meta.base.to_dict()}
    (directory / VERSION_FILE).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def _json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: unreadable {what} ({type(exc).__name__}: {str(exc)[:120]})") from None


def read_meta(directory: str | Path) -> VersionMeta | None:
    """The directory's ``qdevolve_version.json``, validated (``None`` when there is none: a
    version written before it existed, or a plain PEFT / Hugging Face directory)."""
    path = Path(directory) / VERSION_FILE
    if not path.is_file():
        return None
    d = _json(path, "version file")
    if not isinstance(d, dict) or d.get("format") != FORMAT or d.get("kind") not in ("adapter", "full"):
        raise ConfigError(f"{path}: not a qdevolve version file (format {FORMAT}, kind adapter or full)")
    if not isinstance(d.get("run_id"), (str, type(None))) or \
            not (d.get("version") is None or (isinstance(d["version"], int) and not isinstance(d["version"], bool))):
        raise ConfigError(f"{path}: run_id must be a string and version an integer")
    base = None if d.get("base") is None else BaseIdentity.from_dict(d["base"], str(path))
    if d["kind"] == "adapter" and base is None:
        raise ConfigError(f"{path}: an adapter version must name its base")
    return VersionMeta(kind=d["kind"], run_id=d.get("run_id"), version=d.get("version"), base=base)


def version_kind(directory: str | Path) -> str:
    """``adapter`` (it holds ``adapter_config.json``) or ``full`` (a model's ``config.json``).

    Raises:
        ConfigError: the directory is missing or holds neither.
    """
    p = Path(directory)
    if (p / ADAPTER_CONFIG).is_file():
        return "adapter"
    if (p / "config.json").is_file():
        return "full"
    raise ConfigError(f"{p}: not a policy version (no {ADAPTER_CONFIG} or config.json there)")


def check_base(meta: VersionMeta | None, served: BaseIdentity | None, *, directory: str | Path,
               run_id: str | None = None, version: int | None = None) -> None:
    """Refuse an adapter whose recorded base is not ``served`` (the base it is about to be applied to).

    A directory without a version file (a plain PEFT adapter handed over explicitly) records no
    base and is not checked; a recorded base with an unknown served base is refused.
    """
    if meta is None or meta.base is None:
        return
    label = VersionMeta(meta.kind, run_id or meta.run_id, meta.version if version is None else version).label()
    if served is None:
        raise ConfigError(f"{label} ({directory}) is a LoRA adapter of base {meta.base.describe()}; the model it "
                          "would be applied to has no known identity (not loaded from a model directory, or "
                          "changed since); load that base directory, or pass base=DIR")
    if served.sha256 != meta.base.sha256:
        raise ConfigError(f"{label} ({directory}) was trained on base {meta.base.describe()}, but the base here is "
                          f"{served.describe()}; load the version over its own base (or export it merged: "
                          "qdevolve policy export)")


# -- adapter_config.json: data, never a loader's instructions ------------------------------------
_SHAPE = {"r", "lora_alpha", "lora_dropout", "target_modules", "fan_in_fan_out", "bias", "use_rslora"}
_IGNORED = {"peft_type", "task_type", "base_model_name_or_path", "revision", "inference_mode", "init_lora_weights",
            "peft_version", "auto_mapping"}  # informational: qdevolve never loads anything they name (the
# config is rebuilt from the shape fields and applied to a model already loaded; no Auto* class is looked up)
_DEFAULTS = {"megatron_core": "megatron.core", "qalora_group_size": None}  # non-empty defaults, unused


def _empty(value: Any) -> bool:
    return value is None or value is False or value == [] or value == {} or value == ""


def read_adapter_config(directory: str | Path, model: Any) -> Any:
    """A ``peft.LoraConfig`` built from ``directory``'s ``adapter_config.json``, checked against ``model``.

    Raises:
        ConfigError: not a LoRA config; a field qdevolve does not apply is set; ``r``, alpha or
            dropout out of range; a target that is not a projection layer of ``model`` or a
            weight layout (``fan_in_fan_out``) that is not ``model``'s.
    """
    from peft import LoraConfig

    from qdevolve.backends.lora_layout import lora_targets

    path = Path(directory) / ADAPTER_CONFIG
    d = _json(path, "adapter config")
    if not isinstance(d, dict) or str(d.get("peft_type", "")).upper() != "LORA":
        raise ConfigError(f"{path}: not a LoRA adapter config (peft_type must be LORA)")
    if d.get("task_type") not in (None, "CAUSAL_LM"):
        raise ConfigError(f"{path}: task_type {d.get('task_type')!r}: qdevolve serves causal LMs (CAUSAL_LM)")
    for key, value in d.items():
        if key in _SHAPE or key in _IGNORED or _empty(value):
            continue
        if key in _DEFAULTS and (_DEFAULTS[key] is None or value == _DEFAULTS[key]):
            continue
        raise ConfigError(f"{path}: field {key!r} = {str(value)[:80]!r} is not applied by qdevolve (only a plain "
                          f"LoRA: {', '.join(sorted(_SHAPE))}); remove it or leave it empty")
    r, alpha, dropout = d.get("r"), d.get("lora_alpha", d.get("r")), d.get("lora_dropout", 0.0)
    if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= 4096:
        raise ConfigError(f"{path}: r must be an integer in [1, 4096], got {r!r}")
    for name, v, lo, hi in (("lora_alpha", alpha, 0.0, math.inf), ("lora_dropout", dropout, 0.0, 1.0)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi \
                or (name == "lora_alpha" and v == 0):
            raise ConfigError(f"{path}: {name} must be a number in {'(0, inf)' if name == 'lora_alpha' else '[0, 1]'}, "
                              f"got {v!r}")
    names = d.get("target_modules")
    if not isinstance(names, list) or not names or \
            not all(isinstance(n, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) for n in names):
        raise ConfigError(f"{path}: target_modules must be a non-empty list of module names (no regular "
                          f"expressions), got {str(names)[:80]}")
    if d.get("bias", "none") != "none":
        raise ConfigError(f"{path}: bias {d.get('bias')!r}: only bias 'none' is applied")
    for flag in ("fan_in_fan_out", "use_rslora"):
        if not isinstance(d.get(flag, False), bool):
            raise ConfigError(f"{path}: {flag} must be true or false")
    base = base_model_of(model)
    try:
        found, transposed = lora_targets(base, sorted(set(names)))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    missing = sorted(set(names) - set(found))
    if missing:
        raise ConfigError(f"{path}: target_modules {', '.join(missing)} are not projection layers of "
                          f"{type(base).__name__} (it has {', '.join(found)})")
    if bool(d.get("fan_in_fan_out", False)) != transposed:
        raise ConfigError(f"{path}: fan_in_fan_out={d.get('fan_in_fan_out', False)} but {type(base).__name__}'s "
                          f"targets are {'Conv1D (transposed)' if transposed else 'Linear'} layers")
    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=float(dropout), target_modules=sorted(set(names)),
                      fan_in_fan_out=transposed, bias="none", use_rslora=bool(d.get("use_rslora", False)),
                      task_type="CAUSAL_LM")


def _load_weights(peft: Any, directory: Path, name: str) -> None:
    """Fill adapter ``name`` of ``peft`` from ``adapter_model.safetensors``: names and shapes first."""
    from peft.utils import get_peft_model_state_dict, set_peft_model_state_dict
    from safetensors import safe_open

    file = directory / ADAPTER_WEIGHTS
    if not file.is_file():
        other = " (a pickled adapter_model.bin is never loaded: safetensors only)" \
            if (directory / "adapter_model.bin").exists() else ""
        raise ConfigError(f"{directory}: no {ADAPTER_WEIGHTS}{other}")
    expected = get_peft_model_state_dict(peft, adapter_name=name, save_embedding_layers=False)
    try:
        with safe_open(str(file), framework="pt") as st:
            keys = set(st.keys())
            if keys != set(expected):
                extra, missing = sorted(keys - set(expected)), sorted(set(expected) - keys)
                raise ConfigError(f"{file}: tensors do not fit the adapter config on this base (unexpected "
                                  f"{extra[:3]}, missing {missing[:3]})")
            for k in sorted(keys):
                shape = tuple(st.get_slice(k).get_shape())
                if shape != tuple(expected[k].shape):
                    raise ConfigError(f"{file}: tensor {k} has shape {shape}, this base needs "
                                      f"{tuple(expected[k].shape)}")
            tensors = {k: st.get_tensor(k) for k in sorted(keys)}
    except ConfigError:
        raise
    except Exception as exc:  # a damaged or crafted header
        raise ConfigError(f"{file}: unreadable safetensors file ({type(exc).__name__}: {str(exc)[:120]})") from None
    result = set_peft_model_state_dict(peft, tensors, adapter_name=name)
    if getattr(result, "unexpected_keys", None):
        raise ConfigError(f"{file}: tensors not used by the adapter: {sorted(result.unexpected_keys)[:3]}")


def attach_adapter(model: Any, directory: str | Path, *, name: str, trainable: bool = False) -> Any:
    """``model`` (a transformers model or a ``PeftModel``) with the adapter of ``directory`` added as
    ``name`` and made active; the base's weight tensors are the same objects (LoRA layers are
    injected around them, nothing is reloaded). Returns the ``PeftModel``.

    On any error the model is left as it was (a fresh wrapper is unloaded, an added adapter deleted).
    """
    from peft import PeftModel, get_peft_model

    directory = Path(directory)
    config = read_adapter_config(directory, model)
    fresh = not isinstance(model, PeftModel)
    if fresh:
        peft = get_peft_model(model, config, adapter_name=name)
    else:
        if name in model.peft_config:
            raise ValueError(f"adapter {name!r} is already loaded")
        model.add_adapter(name, config)
        peft = model
    try:
        _load_weights(peft, directory, name)
    except BaseException:
        if fresh:
            peft.unload()
        else:
            peft.delete_adapter(name)
        raise
    peft.set_adapter(name, inference_mode=not trainable)  # frozen for sampling, trainable for resume
    return peft


def save_adapter(model: Any, directory: str | Path, adapter_name: str | None = None) -> None:
    """Write ``model``'s adapter (the active one by default) as ``adapter_config.json`` and
    ``adapter_model.safetensors`` (PEFT's and vLLM's layout; the base is not written)."""
    from peft.utils import get_peft_model_state_dict
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    name = adapter_name or model.active_adapter
    state = get_peft_model_state_dict(model, adapter_name=name, save_embedding_layers=False)
    save_file({k: v.detach().contiguous().cpu() for k, v in state.items()}, str(directory / ADAPTER_WEIGHTS),
              metadata={"format": "pt"})
    config = model.peft_config[name].to_dict()
    config = {k: sorted(v) if isinstance(v, set) else v for k, v in config.items()}
    config["base_model_name_or_path"] = None  # the base is named in qdevolve_version.json, by content
    config["inference_mode"] = True
    (directory / ADAPTER_CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True, default=str) + "\n")
