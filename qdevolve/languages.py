"""Programming languages a program may be written in: names, file extensions, comment syntax.

The seed's file extension picks the language (``initial_program.c`` -> ``c``); the name is
stored in ``programs.language``, every child inherits it, the sandbox writes the program
with the language's extension (so ``gcc program.c`` or ``go run program.go`` work), and the
prompts name it. EVOLVE-BLOCK markers are written in the language's line-comment syntax
(``// EVOLVE-BLOCK-START`` in C, ``# EVOLVE-BLOCK-START`` in Python); the marker finder
looks only for the marker words, so any comment style works.

Only Python programs can be edited without a model (the ``ast`` mutator) or checked for
syntax before evaluation; other languages rely on the evaluator to compile them.

This module imports nothing from qdevolve (layer 1), so every layer may use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["Language", "LANGUAGES", "language_for_path", "language_named", "extension", "UnknownLanguage"]


@dataclass(frozen=True)
class Language:
    """One language.

    Attributes:
        name: Stored in ``programs.language`` and used as the code-fence tag in prompts.
        display: The name prompts use in sentences (``"C++"``).
        extensions: File extensions, the first one canonical (the sandbox writes it).
        comment: Line-comment prefix for EVOLVE-BLOCK markers.
        fence_aliases: Code-fence tags a model may use for it (``"golang"``).
    """

    name: str
    display: str
    extensions: tuple[str, ...]
    comment: str
    fence_aliases: tuple[str, ...] = ()

    def marker(self, word: str) -> str:
        """A marker line in this language (``"// EVOLVE-BLOCK-START"``)."""
        return f"{self.comment} {word}"


LANGUAGES: dict[str, Language] = {lang.name: lang for lang in (
    Language("python", "Python", (".py",), "#", ("py", "python3")),
    Language("c", "C", (".c", ".h"), "//"),
    Language("cpp", "C++", (".cpp", ".cc", ".cxx", ".hpp"), "//", ("c++", "cxx")),
    Language("go", "Go", (".go",), "//", ("golang",)),
    Language("rust", "Rust", (".rs",), "//", ("rs",)),
    Language("java", "Java", (".java",), "//"),
    Language("javascript", "JavaScript", (".js", ".mjs"), "//", ("js",)),
    Language("typescript", "TypeScript", (".ts",), "//", ("ts",)),
    Language("julia", "Julia", (".jl",), "#", ("jl",)),
    Language("fortran", "Fortran", (".f90", ".f95", ".f03", ".f"), "!", ("f90",)),
    Language("r", "R", (".r", ".R"), "#"),
    Language("lua", "Lua", (".lua",), "--"),
    Language("bash", "Bash", (".sh",), "#", ("sh", "shell")),
    Language("verilog", "SystemVerilog", (".sv", ".v"), "//", ("systemverilog", "sv")),
    Language("cuda", "CUDA", (".cu",), "//", ("cu",)),
)}

_BY_EXT: dict[str, Language] = {}
for _lang in LANGUAGES.values():
    for _ext in _lang.extensions:
        _BY_EXT.setdefault(_ext, _lang)


class UnknownLanguage(ValueError):
    """A file extension or language name that is not in :data:`LANGUAGES`."""


def language_for_path(path: str | Path) -> Language:
    """The language of a source file, by extension (case-sensitive first, then lower-case).

    Raises:
        UnknownLanguage: the extension names no known language.
    """
    suffix = Path(path).suffix
    lang = _BY_EXT.get(suffix) or _BY_EXT.get(suffix.lower())
    if lang is None:
        known = ", ".join(sorted(_BY_EXT))
        raise UnknownLanguage(f"{path}: unknown program language for extension {suffix or '(none)'!r}; "
                              f"known extensions: {known}")
    return lang


def language_named(name: str) -> Language:
    """The :class:`Language` called ``name`` (or one of its fence aliases).

    Raises:
        UnknownLanguage: no language has that name.
    """
    key = name.strip().lower()
    if key in LANGUAGES:
        return LANGUAGES[key]
    for lang in LANGUAGES.values():
        if key in lang.fence_aliases:
            return lang
    raise UnknownLanguage(f"unknown program language {name!r}; known: {', '.join(LANGUAGES)}")


def extension(name: str) -> str:
    """The canonical file extension of language ``name`` (``".py"`` for an unknown name)."""
    lang = LANGUAGES.get(name)
    return lang.extensions[0] if lang is not None else ".py"
