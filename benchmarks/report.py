"""Regenerate every table of BENCHMARKS.md and every figure quoted in README.md from the raw files.

A generated table sits between two marker lines in ``BENCHMARKS.md``::

    <!-- report:<name>:<id> -->
    ...
    <!-- /report -->

and a figure quoted in ``README.md`` between ``<!-- figure:<name>:<key> -->`` and
``<!-- /figure -->`` (inline, inside a sentence). A marker right after a backtick is quoted
prose, not a block. ``<name>`` is a raw result,
``benchmarks/results/<name>.json``; its renderer is the module ``benchmarks/reports/<name>.py``
(or one whose ``RAW_NAMES`` lists ``<name>``), whose ``render(raw) -> dict[str, str]`` maps
table ids and figure keys to markdown; the key ``meta`` is the raw file's provenance line
(commit, command, seeds, date, load: ``_raw.describe_meta``) unless the renderer gives its own. A renderer may also define ``plots(raw) -> dict[str,
dict]`` (a PNG path relative to the repository -> the series it plots) and ``draw(path, series)``;
the series are written beside the PNG as ``<stem>.plot.json``, and ``--check`` compares those
series, not pixels.

    python benchmarks/report.py            # rewrite the blocks and plots
    python benchmarks/report.py --check    # exit 1 with a diff when anything differs
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _raw import describe_meta, load_raw, raw_path  # noqa: E402

ROOT = HERE.parent
RENDERERS = HERE / "reports"
DOCS = ("BENCHMARKS.md", "README.md")  # either kind of block may sit in either file
NAME = r"[A-Za-z0-9_.\-]+"
OPEN = re.compile(rf"(?<!`)<!-- (report|figure):({NAME}):({NAME}) -->")  # a marker quoted in `code` is prose
CLOSE = {"report": "<!-- /report -->", "figure": "<!-- /figure -->"}


class ReportError(Exception):
    """A block that cannot be rendered: unknown renderer, missing raw file or key, bad markers."""


@dataclass(frozen=True)
class Block:
    kind: str  # "report" or "figure"
    name: str
    key: str
    start: int  # offset of the text between the markers
    end: int
    line: int

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.name}:{self.key}"


def parse_blocks(text: str, doc: str) -> list[Block]:
    """The marked blocks of ``text`` in order.

    Raises:
        ReportError: an opening marker without its closing one, or a block opened inside another.
    """
    blocks, pos = [], 0
    while (m := OPEN.search(text, pos)) is not None:
        kind, name, key = m.groups()
        line = text.count("\n", 0, m.start()) + 1
        close = text.find(CLOSE[kind], m.end())
        if close < 0:
            raise ReportError(f"{doc}:{line}: <!-- {kind}:{name}:{key} --> has no closing {CLOSE[kind]}")
        inner = OPEN.search(text, m.end(), close)
        if inner is not None:
            raise ReportError(f"{doc}:{line}: block {kind}:{name}:{key} contains another opening marker "
                              f"({inner.group(0)}, line {text.count(chr(10), 0, inner.start()) + 1})")
        blocks.append(Block(kind, name, key, m.end(), close, line))
        pos = close + len(CLOSE[kind])
    return blocks


def discover(renderers: Path = RENDERERS) -> dict[str, ModuleType]:
    """Raw name -> renderer module: every ``renderers/<name>.py`` (not starting with ``_``) that
    defines ``render``, under its stem and every name of its ``RAW_NAMES``."""
    found: dict[str, ModuleType] = {}
    for path in sorted(renderers.glob("*.py")):
        if path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"qdevolve_bench_reports.{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if not callable(getattr(module, "render", None)):
            raise ReportError(f"{path}: a renderer must define render(raw) -> dict[str, str]")
        for name in (path.stem, *getattr(module, "RAW_NAMES", ())):
            if name in found and found[name] is not module:
                raise ReportError(f"raw name {name!r} is claimed by two renderers: {found[name].__file__} and {path}")
            found[name] = module
    return found


def block_text(block: Block, rendered: str) -> str:
    """What goes between the markers: a table on lines of its own; a figure inline."""
    if block.kind == "report":
        return "\n" + rendered.strip("\n") + "\n"
    return rendered.strip()


class Renderer:
    """Renders each raw name once per invocation."""

    def __init__(self, root: Path, renderers: dict[str, ModuleType]):
        self.root, self.renderers = root, renderers
        self.results = root / "benchmarks" / "results"
        self._cache: dict[str, dict[str, str]] = {}

    def raw(self, name: str) -> dict[str, Any]:
        return load_raw(name, self.results)

    def render(self, name: str) -> dict[str, str]:
        if name not in self._cache:
            if name not in self.renderers:
                raise ReportError(f"unknown renderer {name!r}: no benchmarks/reports/{name}.py (known: "
                                  f"{', '.join(sorted(self.renderers)) or 'none'})")
            try:
                raw = self.raw(name)
            except FileNotFoundError as exc:
                raise ReportError(str(exc)) from exc
            out = self.renderers[name].render(raw)
            if not isinstance(out, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in out.items()):
                raise ReportError(f"benchmarks/reports renderer of {name!r}: render() must return dict[str, str]")
            out = {"meta": describe_meta(name, raw["meta"]), **out}  # every raw file's provenance line
            self._cache[name] = out
        return self._cache[name]

    def text_for(self, doc: str, block: Block) -> str:
        out = self.render(block.name)
        if block.key not in out:
            raise ReportError(f"{doc}:{block.line}: block {block.label}: the renderer of "
                              f"{raw_path(block.name, self.results).relative_to(self.root)} has no key "
                              f"{block.key!r} (it has: {', '.join(sorted(out))})")
        return block_text(block, out[block.key])

    def plots(self, names: set[str]) -> dict[Path, tuple[ModuleType, dict[str, Any]]]:
        """PNG path -> (renderer, series) for every referenced raw name whose renderer plots."""
        out: dict[Path, tuple[ModuleType, dict[str, Any]]] = {}
        for name in sorted(names):
            module = self.renderers.get(name)
            if module is None or not callable(getattr(module, "plots", None)):
                continue
            for rel, series in module.plots(self.raw(name)).items():
                out[self.root / rel] = (module, json.loads(json.dumps(series, allow_nan=False)))
        return out


def sidecar(png: Path) -> Path:
    return png.with_name(png.stem + ".plot.json")


def run(root: Path, check: bool, renderers: Path = RENDERERS) -> list[str]:
    """Rewrite (or, with ``check``, compare) every block and plot under ``root``; the problems found."""
    problems: list[str] = []
    rd = Renderer(root, discover(renderers))
    referenced: set[str] = set()
    for doc in DOCS:
        path = root / doc
        if not path.exists():
            continue
        text = path.read_text()
        try:
            blocks = parse_blocks(text, doc)
        except ReportError as exc:
            problems.append(str(exc))
            continue
        pieces, pos = [], 0
        for b in blocks:
            referenced.add(b.name)
            current = text[b.start:b.end]
            try:
                new = rd.text_for(doc, b)
            except ReportError as exc:
                problems.append(f"{doc}:{b.line}: block {b.label}: {exc}" if not str(exc).startswith(doc) else str(exc))
                new = current
            if new != current and check:
                diff = "".join(difflib.unified_diff(
                    current.splitlines(keepends=True) or [""], new.splitlines(keepends=True) or [""],
                    fromfile=f"{doc} (line {b.line}, block {b.label})",
                    tofile=f"rendered from benchmarks/results/{b.name}.json", n=1))
                problems.append(f"{doc}:{b.line}: block {b.label} differs from what "
                                f"benchmarks/results/{b.name}.json gives (run python benchmarks/report.py):\n{diff}")
            pieces += [text[pos:b.start], new]
            pos = b.end
        pieces.append(text[pos:])
        if not check:
            path.write_text("".join(pieces))
    try:
        plots = rd.plots({n for n in referenced if n in rd.renderers})
    except (FileNotFoundError, ReportError):
        plots = {}  # a missing raw file is already reported by its block
    for png, (module, series) in plots.items():
        rel = png.relative_to(root)
        side = sidecar(png)
        if check:
            stored = json.loads(side.read_text()) if side.exists() else None
            if stored != series:
                problems.append(f"plot {rel}: its plotted series ({side.relative_to(root)}) "
                                f"{'is missing' if stored is None else 'differ from what the raw file gives'}"
                                " (run python benchmarks/report.py)")
            elif not png.exists():
                problems.append(f"plot {rel} is missing (run python benchmarks/report.py)")
        else:
            png.parent.mkdir(parents=True, exist_ok=True)
            module.draw(png, series)
            side.write_text(json.dumps(series, indent=1, sort_keys=True) + "\n")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when a block or plot differs")
    ap.add_argument("--root", type=Path, default=ROOT, help="repository root (BENCHMARKS.md, README.md, "
                                                            "benchmarks/results/)")
    args = ap.parse_args(argv)
    try:
        problems = run(args.root.resolve(), args.check)
    except ReportError as exc:
        problems = [str(exc)]
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"report: {len(problems)} problem(s)" + (" (--check)" if args.check else ""), file=sys.stderr)
        return 1
    print("report: every block and plot matches its raw file" if args.check else "report: blocks and plots rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
