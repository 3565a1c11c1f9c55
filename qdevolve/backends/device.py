"""Where a model lives: the one code path the trainer and the backends use to pick and share a device.

A trainer and a ``transformers`` backend that share one model object must compute on the
device that model is on; both ask this module, so they can never disagree:

* :func:`resolve_device` turns a setting (``cpu``, ``cuda``, ``cuda:1``, ``auto``, a
  ``torch.device``) into a ``torch.device``, refusing a CUDA device torch cannot see with an
  error that says what torch was built for;
* :func:`model_device` is the device of a model's first parameter (or buffer; ``cpu`` for a
  model without either), i.e. where its inputs must go;
* :func:`place` moves a model (in place, as ``nn.Module.to`` does) to a requested device, or
  leaves it where it is when none is requested, and returns the device it is on.
"""

from __future__ import annotations

from typing import Any

from qdevolve.errors import ConfigError

__all__ = ["resolve_device", "model_device", "place"]


def resolve_device(spec: Any = None) -> Any:
    """``torch.device`` for ``spec`` (``None`` and ``"auto"``: CUDA when torch sees one, else CPU).

    Raises:
        ConfigError: the name is not a device, or asks for CUDA (or a CUDA index) torch cannot see.
    """
    import torch

    if isinstance(spec, torch.device):
        device = spec
    else:
        name = "auto" if spec is None else str(spec).strip().lower()
        if name == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            device = torch.device(name)
        except (RuntimeError, ValueError):
            raise ConfigError(f"device {spec!r} is not a torch device; use cpu, cuda, cuda:N or auto") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            built = f"torch {torch.__version__}" + ("" if torch.version.cuda else ", built without CUDA")
            raise ConfigError(f"device {str(device)!r}: torch sees no CUDA device ({built}); use device cpu "
                              "or install a CUDA build of torch on a machine with a GPU")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"device {str(device)!r}: torch sees {torch.cuda.device_count()} CUDA device(s)")
    return device


def model_device(model: Any) -> Any:
    """The device of ``model``'s first parameter, else its first buffer, else ``cpu``."""
    import torch

    for tensors in (model.parameters(), model.buffers()):
        for t in tensors:
            return t.device
    return torch.device("cpu")


def place(model: Any, device: Any = None, *, dtype: Any = None) -> Any:
    """Move ``model`` to ``device`` (and ``dtype``) in place; ``device=None`` keeps it where it
    is. Returns the device the model is on afterwards (:func:`model_device`)."""
    if device is not None:
        target = resolve_device(device)
        if model_device(model) != target or dtype is not None:
            model.to(device=target, **({} if dtype is None else {"dtype": dtype}))
    elif dtype is not None:
        model.to(dtype=dtype)
    return model_device(model)
