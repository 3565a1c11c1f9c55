"""Build the chat messages that ask a model for a child program.

A prompt is two messages: the *system message* (the role and the rules) and a *user
message* rendered from a template for the edit format (``diff``, ``rewrite``,
``crossover``) with these placeholders:

``{language}``, ``{language_name}``, ``{current_program}``, ``{metrics}``, ``{fitness_score}``, ``{artifacts}``
(stderr, tracebacks and evaluator feedback of the parent's evaluation, ANSI-stripped,
secret-looking strings redacted, each truncated to ``max_artifact_chars``, all together to
``max_artifact_bytes`` characters when set),
``{evolution_history}`` (inspirations: other archive programs with their scores),
``{second_program}`` / ``{second_metrics}`` (crossover), ``{block}`` / ``{block_label}`` (the
``block`` format: the one EVOLVE-BLOCK body to rewrite, from ``extra``). Unknown placeholders render empty,
so OpenEvolve template directories (``diff_user.txt``, ``full_rewrite_user.txt``,
``system_message.txt``) can be reused.

Templates are looked up, first match wins, in ``settings["templates"][name]`` (text),
``settings["template_dir"]/<name>.txt``, ``settings["example_dir"]/prompts/<name>.txt`` (only
a file that resolves inside the example directory: a symlink out is an error), and the
defaults shipped in ``qdevolve/prompts/templates``. ``settings["system_message"]``
overrides the system template: its text, or (as in OpenEvolve configs) a template name.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Any, Literal

from qdevolve.errors import ConfigError
from qdevolve.prompts.tree_view import render_code, tree_note
from qdevolve.types import EvalResult, Program

__all__ = ["build_prompt", "prompt_hash", "load_template", "render_artifacts", "truncate_middle", "TEMPLATE_NAMES"]

EditFormat = Literal["diff", "rewrite", "crossover", "block"]
TEMPLATE_NAMES: dict[str, str] = {"diff": "diff_user", "rewrite": "full_rewrite_user", "crossover": "crossover_user",
                                  "block": "block_user"}
_DEFAULTS = Path(__file__).parent / "templates"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_SECRETS = [
    re.compile(r"(?i)\b(api[_-]?key|token|secret|password|authorization)(\s*[:=]\s*)(\S+)"),
    re.compile(r"\b(sk|pk|rk|hf|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{12,}\b"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{12,}=*"),
]


def _display_name(language: str) -> str:
    """How prompts name ``language`` in a sentence (``"C++"`` for ``cpp``)."""
    from qdevolve.languages import LANGUAGES

    lang = LANGUAGES.get(language)
    return lang.display if lang is not None else language


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return ""


def load_template(name: str, settings: dict[str, Any]) -> str:
    """The text of template ``name`` (without ``.txt``), honouring the overrides."""
    inline = (settings.get("templates") or {}).get(name)
    if inline is not None:
        return str(inline)
    dirs = []
    if settings.get("template_dir"):
        dirs.append(Path(settings["template_dir"]))
    if settings.get("example_dir"):
        dirs.append(Path(settings["example_dir"]) / "prompts")
    dirs.append(_DEFAULTS)
    example = Path(settings["example_dir"]) if settings.get("example_dir") else None
    for d in dirs:
        f = d / f"{name}.txt"
        if f.is_file():
            if example is not None and d == example / "prompts" and not _inside(f, example):
                raise ConfigError(f"{f}: is a symbolic link out of the example directory "
                                  f"(to {os.path.realpath(f)}); prompt files are read only from inside it")
            return f.read_text(encoding="utf-8")
    raise ConfigError(f"prompt template '{name}.txt' not found in {', '.join(map(str, dirs))}")


def _inside(path: Path, directory: Path) -> bool:
    """True when ``path`` resolves (symlinks followed) inside ``directory``."""
    real, root = os.path.realpath(path), os.path.realpath(directory)
    return real.startswith(root.rstrip(os.sep) + os.sep)


def truncate_middle(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping 1/4 head and 3/4 tail.

    The tail is kept longer because a traceback's last lines name the error.
    """
    if limit <= 0 or len(text) <= limit:
        return text
    head, tail = limit // 4, limit - limit // 4
    cut = len(text) - head - tail
    return f"{text[:head]}\n... [{cut} characters truncated] ...\n{text[len(text) - tail:]}"


def _clean(text: str, redact: bool) -> str:
    text = _ANSI.sub("", text)
    if redact:
        text = _SECRETS[0].sub(lambda m: f"{m.group(1)}{m.group(2)}[REDACTED]", text)
        for rx in _SECRETS[1:]:
            text = rx.sub("[REDACTED]", text)
    return text


def render_artifacts(result: EvalResult | None, settings: dict[str, Any]) -> str:
    """The parent's evaluation feedback as a prompt section ('' when there is none)."""
    if result is None or not settings.get("include_artifacts", True):
        return ""
    limit = int(settings.get("max_artifact_chars", 2000))
    # ``private.*`` artifacts (ShinkaEvolve's private metrics) are stored but never shown to the model.
    items = [(k, v) for k, v in sorted(result.artifacts.items())
             if str(v).strip() and not k.startswith("private.")]
    items = items[: int(settings.get("max_artifacts", 8))]
    if not items and result.ok:
        return ""
    parts = ["\n# Feedback from the evaluation of the current program"]
    if not result.ok:
        parts.append(f"Status: {result.status}" + (f" ({result.error})" if result.error else ""))
    total = settings.get("max_artifact_bytes")
    budget = int(total) if total is not None else None
    for key, value in items:
        body = truncate_middle(_clean(str(value), settings.get("redact_artifacts", True)), limit)
        if budget is not None:
            if budget <= 0:
                parts.append(f"## {key}\n[omitted: max_artifact_bytes reached]")
                continue
            body = truncate_middle(body, budget)
            budget -= len(body)
        parts.append(f"## {key}\n```\n{body.rstrip()}\n```")
    return "\n".join(parts) + "\n"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}" if math.isfinite(v) else str(v)
    return str(v)


def render_metrics(result: EvalResult | None) -> str:
    """Score, status and metrics as ``- name: value`` lines."""
    if result is None:
        return "- not evaluated yet"
    lines = [f"- score: {_fmt(result.score) if result.score is not None else 'none'}"]
    if not result.ok:
        lines.append(f"- status: {result.status}" + (f" ({result.error})" if result.error else ""))
    lines += [f"- {k}: {_fmt(v)}" for k, v in sorted(result.metrics.items()) if k != "combined_score"]
    lines += [f"- {k} (feature): {_fmt(v)}" for k, v in sorted(result.features.items()) if k not in result.metrics]
    return "\n".join(lines)


def _inspirations(items: list[tuple[Program, EvalResult]], settings: dict[str, Any], language: str) -> str:
    k = settings.get("num_inspirations")
    k = len(items) if k is None else int(k)
    if k <= 0 or not items:
        return ""
    limit = int(settings.get("max_inspiration_chars", 4000))
    parts = ["\n# Other programs from the archive, for inspiration"]
    for i, (prog, res) in enumerate(items[:k], 1):
        score = _fmt(res.score) if res is not None and res.score is not None else "none"
        parts.append(f"## Program {i} (score {score}, operator {prog.operator})\n```{language}\n"
                     f"{truncate_middle(render_code(prog.code), limit).rstrip()}\n```")
    return "\n".join(parts) + "\n"


def build_prompt(
    parent: Program,
    parent_result: EvalResult | None,
    inspirations: list[tuple[Program, EvalResult]] | None = None,
    *,
    edit_format: EditFormat = "diff",
    settings: dict[str, Any] | None = None,
    other_parents: list[tuple[Program, EvalResult | None]] | None = None,
    extra: dict[str, str] | None = None,
) -> list[dict[str, str]]:
    """Chat messages asking for a child of ``parent`` in ``edit_format``.

    Args:
        parent: The program to change (shown in full, markers included).
        parent_result: Its evaluation (metrics and artifacts), if any.
        inspirations: Other archive programs to show (``num_inspirations`` of them).
        edit_format: ``diff``, ``rewrite`` or ``crossover``.
        settings: Prompt settings (see the module docstring).
        other_parents: For crossover, ``[(second_parent, its_result)]``.
        extra: More placeholder values (the ``block`` format's ``block`` and ``block_label``).

    Raises:
        ConfigError: unknown ``edit_format``, a missing template, or a template whose
            placeholders cannot be formatted.
    """
    settings = dict(settings or {})
    if edit_format not in TEMPLATE_NAMES:
        raise ConfigError(f"unknown edit_format {edit_format!r}; use one of {', '.join(TEMPLATE_NAMES)}")
    language = str(settings.get("language") or parent.language or "python")
    history = _inspirations(list(inspirations or []), settings, language)
    values = _Blank(
        language=language,
        language_name=_display_name(language),
        current_program=render_code(parent.code).rstrip("\n"),
        metrics=render_metrics(parent_result),
        fitness_score=_fmt(parent_result.score) if parent_result is not None and parent_result.score is not None else "none",
        artifacts=render_artifacts(parent_result, settings),
        evolution_history=history,
        top_programs=history,
        second_program="",
        second_metrics="",
    )
    values.update(extra or {})
    if edit_format == "crossover":
        if not other_parents:
            raise ConfigError("a crossover prompt needs a second parent in other_parents")
        second, second_result = other_parents[0]
        values["second_program"] = render_code(second.code).rstrip("\n")
        values["second_metrics"] = render_metrics(second_result)
    name = TEMPLATE_NAMES[edit_format]
    system = settings.get("system_message")
    if system is None:
        system = load_template("system_message", settings)
    elif re.fullmatch(r"[\w.-]+", str(system)):  # OpenEvolve style: the name of a template
        try:
            system = load_template(str(system), settings)
        except ConfigError:
            pass  # a one-word literal message
    try:
        user = load_template(name, settings).format_map(values)
        system = str(system).format_map(values) if "{" in str(system) else str(system)
    except (ValueError, IndexError, AttributeError) as exc:
        raise ConfigError(f"prompt template '{name}' cannot be rendered: {exc}; escape literal braces as {{{{ }}}}") from exc
    user = user.strip() + "\n" + tree_note(parent.code, edit_format)  # several files: name each
    return [{"role": "system", "content": system.strip()}, {"role": "user", "content": user}]


def prompt_hash(messages: list[dict[str, str]] | str) -> str:
    """SHA-256 (first 32 hex characters) of the messages as canonical JSON."""
    data = messages if isinstance(messages, str) else json.dumps(messages, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:32]
