"""Mutation ``block``: the model rewrites one EVOLVE-BLOCK's body; it is spliced back in.

Made for small models, which rarely reproduce a SEARCH section or a whole program exactly:
the prompt shows the whole program for context, then the one block to rewrite on its own,
and asks for that block's new code only, in a fenced block. A parent with several regions
gets one of them, drawn from the run's generator; a parent without markers is one region.

Reading the reply is a careful reader's job, each step recorded in ``metadata["cleaned"]``:

1. the code: the fenced block in the program's language (or untagged), the longest when
   there are several; with no fence, the whole reply (``no_fence``) less the leading and
   trailing prose lines that keep it from parsing (``prose``);
2. marker lines the model repeated (``markers``): what lies between a START and an END line
   (the region's own pair when the reply has as many regions as the parent), after a lone
   START, before a lone END; stray marker lines are dropped;
3. the fixed code the model repeated around the new body (``repeated_context``): leading
   lines equal to the start or the end of the code before the region, trailing lines equal
   to the start or the end of the code after it, and (for a top-level region) any
   top-level statement equal to one of the fixed code's;
4. indentation (``reindented``): the body is dedented, then indented as the parent's region;
5. what trails off (``cut_off``: a body that does not parse is cut back to its longest
   parsing head, keeping at least half its lines; ``example_usage``: calls, loops and
   ``if __name__`` blocks after the last definition, when the region had none);
6. a dropped parameter (``signature``): a function of the region redefined with a strict
   subset of its parameters gets the parent's ``def`` line back, since the fixed code calls it so;
7. a function's body without its ``def`` line (``function_body``): when the region is one
   top-level function and the reply defines none, the reply is put under the region's
   ``def`` line and docstring;
8. a renamed function (``renamed``): when the region's one missing public function has no
   definition in the reply and the reply defines exactly one public function the region
   does not, that function takes the region's name (an alias keeps the model's name for
   its own calls); step 6 then restores dropped parameters.

A reply made of SEARCH/REPLACE blocks is applied as a diff (``metadata["salvaged"] = "diff"``).
The child is refused, with the reason, when the body is empty, unchanged, or no longer
defines a public function or class of the region that the rest of the program may call: one
the fixed code names, or one no other definition of the region calls (the evaluator may call
it); a helper only the region's own functions call may go. The shared checks of
:class:`~qdevolve.mutation._llm.LLMMutation` follow (syntax, fixed code unchanged in meaning,
length).
"""

from __future__ import annotations

import ast
import copy
import textwrap
from typing import Any

from qdevolve import registry
from qdevolve.mutation._llm import LLMMutation, ParseError, extract_code_blocks
from qdevolve.mutation.base import Candidate, MutationContext
from qdevolve.mutation.blocks import END, START, find_blocks, splice_blocks
from qdevolve.mutation.rewrite import as_diff
from qdevolve.prompts import build_prompt
from qdevolve.types import Program

__all__ = ["BlockMutation", "body_from_reply"]

_ALIASES = {"python": {"python", "py", "python3", ""}}
_MAX_PROSE_LINES = 12  # prose lines tried off each end of an unfenced reply


def _indent_of(text: str) -> str:
    line = next((ln for ln in text.split("\n") if ln.strip()), "")
    return line[: len(line) - len(line.lstrip())]


def _parses(code: str) -> bool:
    try:
        ast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError):
        return False
    return True


def _pick_code(reply: str, language: str, notes: list[str]) -> str:
    """Step 1: the reply's code (see the module docstring)."""
    blocks = extract_code_blocks(reply)
    if blocks:
        ok = _ALIASES.get(language, {language, ""})
        chosen = [code for lang, code in blocks if lang in ok] or [code for _, code in blocks]
        return max(chosen, key=len)
    notes.append("no_fence")
    lines = reply.strip("\n").split("\n")
    if language != "python" or _parses("\n".join(lines)):
        return "\n".join(lines)
    for lo in range(min(_MAX_PROSE_LINES, len(lines))):
        for hi in range(len(lines), max(lo, len(lines) - _MAX_PROSE_LINES), -1):
            part = "\n".join(lines[lo:hi])
            if part.strip() and _parses(part):
                notes.append("prose")
                return part
    raise ParseError("no fenced code block in the reply, and no run of its lines parses as Python")


def _between_markers(code: str, index: int, n_regions: int, notes: list[str]) -> str:
    """Step 2: the region's body when the reply repeated marker lines."""
    if START not in code and END not in code:
        return code
    notes.append("markers")
    lines = code.split("\n")
    starts = [i for i, ln in enumerate(lines) if START in ln]
    ends = [i for i, ln in enumerate(lines) if END in ln]
    pairs = [(s, e) for s, e in zip(starts, ends, strict=False) if s < e]
    if len(pairs) == n_regions == len(starts) == len(ends):
        s, e = pairs[index]
        lines = lines[s + 1:e]
    elif len(pairs) == 1 and len(starts) == len(ends) == 1:
        s, e = pairs[0]
        lines = lines[s + 1:e]
    elif starts and not ends:
        lines = lines[starts[-1] + 1:]
    elif ends and not starts:
        lines = lines[:ends[0]]
    return "\n".join(ln for ln in lines if "EVOLVE-BLOCK" not in ln)


def _key(lines: list[str]) -> list[str]:
    return [ln.strip() for ln in lines if ln.strip()]


def _lead_repeat(body: list[str], fixed: list[str]) -> int:
    """How many leading lines of ``body`` repeat the start or the end of ``fixed``."""
    want = _key(fixed)
    idx = [i for i, ln in enumerate(body) if ln.strip()]
    best = 0
    for k in range(1, min(len(want), len(idx) - 1) + 1):
        got = [body[i].strip() for i in idx[:k]]
        if got == want[:k] or got == want[len(want) - k:]:
            best = idx[k - 1] + 1
    return best


def _strip_repeats(body: str, before: str, after: str, notes: list[str]) -> str:
    """Step 3, line by line: the fixed code repeated at either end of the body."""
    lines = body.split("\n")
    lo = _lead_repeat(lines, before.split("\n"))
    rev = _lead_repeat(lines[lo:][::-1], after.split("\n")[::-1])
    if lo or rev:
        notes.append("repeated_context")
        lines = lines[lo:len(lines) - rev]
    return "\n".join(lines)


def _drop_fixed_statements(body: str, fixed: str, notes: list[str]) -> str:
    """Step 3, by statement: top-level statements of ``body`` equal to one of ``fixed``'s."""
    try:
        mine, theirs = ast.parse(body), ast.parse(fixed)
    except (SyntaxError, ValueError):
        return body
    seen = {ast.dump(st) for st in theirs.body}
    drop = [st for st in mine.body if ast.dump(st) in seen]
    if not drop or len(drop) == len(mine.body):
        return body
    lines = body.split("\n")
    gone: set[int] = set()
    for st in drop:
        first = min([st.lineno] + [d.lineno for d in getattr(st, "decorator_list", [])])
        gone.update(range(first - 1, (st.end_lineno or st.lineno)))
    notes.append("repeated_context")
    return "\n".join(ln for i, ln in enumerate(lines) if i not in gone)


def _cut_off_tail(body: str, wanted: set[str], notes: list[str]) -> str:
    """A body that does not parse, cut back to its longest head of whole lines that does.

    A reply cut off at ``max_tokens``, or trailing off into broken code after the block,
    keeps what it completed (``cut_off``): a head that still defines every public function
    and class of ``wanted`` (the region's), or, when the region defines none, at least half
    of the body's lines.
    """
    if _parses(body):
        return body
    lines = body.split("\n")
    for hi in range(len(lines) - 1, 0 if wanted else max(0, len(lines) // 2) - 1, -1):
        head = "\n".join(lines[:hi]).rstrip()
        if not head.strip() or not _parses(head):
            continue
        defs = _public_defs(textwrap.dedent(head)) or set()
        if wanted <= defs:
            notes.append("cut_off")
            return head
        if wanted:
            return body
    return body


def _rename_lone_function(old: str, body: str, wanted: set[str], notes: list[str]) -> str:
    """Step 8: the reply's one new public function takes the name of the region's missing one
    (``wanted``: :func:`_required_defs`)."""
    try:
        theirs, mine = ast.parse(textwrap.dedent(old)), ast.parse(body)
    except (SyntaxError, ValueError):
        return body
    fn_types = (ast.FunctionDef, ast.AsyncFunctionDef)
    region = {st.name for st in theirs.body if isinstance(st, (*fn_types, ast.ClassDef))}
    wanted = {st.name for st in theirs.body if isinstance(st, fn_types) and st.name in wanted}
    have = {st.name for st in mine.body if isinstance(st, (*fn_types, ast.ClassDef))}
    missing = sorted(wanted - have)
    new = [st for st in mine.body if isinstance(st, fn_types) and not st.name.startswith("_")
           and st.name not in region]  # a helper the region already had is not a renamed function
    if len(missing) != 1 or len(new) != 1:
        return body
    fn, name = new[0], missing[0]
    lines = body.split("\n")
    k = fn.lineno - 1
    head = lines[k]
    at = head.find(f"def {fn.name}")
    if at < 0:
        return body
    lines[k] = head[:at] + f"def {name}" + head[at + len("def ") + len(fn.name):]
    uses = any(isinstance(n, ast.Name) and n.id == fn.name for n in ast.walk(mine))
    end = fn.end_lineno or fn.lineno
    if uses:  # the model's own calls by its name still resolve
        lines.insert(end, f"{_indent_of(head)}{fn.name} = {name}")
    notes.append("renamed")
    return "\n".join(lines)


def _is_usage(st: ast.stmt) -> bool:
    """A top-level statement that runs something: a call or ``if __name__ == ...`` (example usage)."""
    if isinstance(st, ast.Expr):
        return not isinstance(st.value, ast.Constant)
    return isinstance(st, (ast.If, ast.For, ast.While)) or (
        isinstance(st, ast.Assign) and isinstance(st.value, ast.Call))


def _drop_usage(body: str, old: str, notes: list[str]) -> str:
    """Top-level example usage after the last definition (``example_usage``), unless the region had some."""
    try:
        mine, theirs = ast.parse(body), ast.parse(textwrap.dedent(old))
    except (SyntaxError, ValueError):
        return body
    if any(_is_usage(st) for st in theirs.body):
        return body
    defs = [i for i, st in enumerate(mine.body) if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    tail = mine.body[defs[-1] + 1:] if defs else []
    if not tail or not all(_is_usage(st) or isinstance(st, ast.Assign) for st in tail):
        return body
    notes.append("example_usage")
    return "\n".join(body.split("\n")[: mine.body[defs[-1]].end_lineno]).rstrip()


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    return [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)] + \
        [x.arg for x in (a.vararg, a.kwarg) if x is not None]


def _header(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int] | None:
    """0-based line span of ``fn``'s ``def`` header (``None`` when its body starts on that line)."""
    end = fn.body[0].lineno - 1
    return (fn.lineno - 1, end) if end > fn.lineno - 1 else None


def _restore_signatures(old: str, body: str, notes: list[str]) -> str:
    """The parent's ``def`` line back on a function that dropped some of its parameters.

    The fixed code calls the region's functions with the parent's parameters; a new
    definition of the same name whose parameters are a strict subset of the parent's gets
    the parent's header (``signature``), so it still accepts those calls.
    """
    try:
        theirs, mine = ast.parse(textwrap.dedent(old)), ast.parse(body)
    except (SyntaxError, ValueError):
        return body
    fn_types = (ast.FunctionDef, ast.AsyncFunctionDef)
    parent_fns = {st.name: st for st in theirs.body if isinstance(st, fn_types)}
    old_lines, lines = textwrap.dedent(old).split("\n"), body.split("\n")
    for st in sorted((st for st in mine.body if isinstance(st, fn_types)), key=lambda f: -f.lineno):
        ref = parent_fns.get(st.name)
        if ref is None or not set(_params(st)) < set(_params(ref)):
            continue
        span, ref_span = _header(st), _header(ref)
        if span is None or ref_span is None:
            continue
        lines[span[0]:span[1]] = old_lines[ref_span[0]:ref_span[1]]
        notes.append("signature")
    return "\n".join(lines)


def _public_defs(code: str) -> set[str] | None:
    """Public top-level functions and classes of ``code`` (``None`` when it does not parse)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    return {st.name for st in tree.body
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not st.name.startswith("_")}


def _required_defs(old: str, fixed: str) -> set[str]:
    """The region's public functions and classes that the rest of the program may call.

    A definition is required when the fixed code names it, or when no other definition of the
    region calls it (an entry point the evaluator may call); a helper that only the region's
    own functions call may go with them. Without that, the helpers a model once added would
    pile up into requirements every later reply must meet.
    """
    try:
        region = ast.parse(textwrap.dedent(old))
    except (SyntaxError, ValueError):
        return set()
    defs = {st.name: st for st in region.body
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not st.name.startswith("_")}
    try:
        outside = {n.id for n in ast.walk(ast.parse(fixed)) if isinstance(n, ast.Name)}
    except (SyntaxError, ValueError):
        outside = set(defs)
    called = {n.id for name, st in defs.items() for n in ast.walk(st) if isinstance(n, ast.Name) and n.id != name}
    required = {d for d in defs if d in outside or d not in called}
    return required or set(defs)


def _under_parent_header(old: str, body: str) -> str | None:
    """``body`` as the body of the region's one function, under its ``def`` line and docstring.

    Taken when the parent's region is a single top-level function and ``body`` (no ``def``
    or ``class`` of its own) parses as that function's body; ``None`` otherwise.
    """
    try:
        region = ast.parse(old)
        ast.parse("def _f():\n" + textwrap.indent(body, "    "))
    except (SyntaxError, ValueError):
        return None
    fns = [st for st in region.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
    if len(fns) != 1 or not isinstance(fns[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    fn = fns[0]
    first = fn.body[0]
    is_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    if is_doc and len(fn.body) == 1:
        return None
    head_end = (first.end_lineno or first.lineno) if is_doc else first.lineno - 1
    start = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    lines = old.split("\n")
    header = "\n".join(lines[start - 1:head_end])
    inner = _indent_of(lines[(fn.body[1] if is_doc else first).lineno - 1]) or "    "
    return header + "\n" + textwrap.indent(body, inner).rstrip("\n") + "\n"


def body_from_reply(reply: str, parent_code: str, index: int = 0, language: str = "python") -> tuple[str, list[str]]:
    """The new body of region ``index`` of ``parent_code`` read from ``reply``, and the cleaning steps.

    The body comes back indented as the parent's region, ready for
    :func:`~qdevolve.mutation.blocks.splice_blocks`.

    Raises:
        ParseError: the parent's markers are broken, or the reply holds no code for the region.
    """
    try:
        blocks = find_blocks(parent_code)
    except ValueError as exc:
        raise ParseError(f"the parent's EVOLVE-BLOCK markers are broken: {exc}") from None
    if not 0 <= index < len(blocks):
        raise ParseError(f"region {index} asked for; the parent has {len(blocks)}")
    region = blocks[index]
    old = parent_code[region.start:region.end]
    marked = START in parent_code
    before, after = "", ""
    if marked:  # the fixed code around the region, its marker lines left out
        head, tail = parent_code[:region.start].rstrip("\n"), parent_code[region.end:]
        before = head.rsplit("\n", 1)[0] if "\n" in head else ""
        after = tail.split("\n", 1)[1] if "\n" in tail else ""
    notes: list[str] = []
    code = _pick_code(reply.replace("\r\n", "\n"), language, notes)
    code = _between_markers(code, index, len(blocks), notes)
    code = _strip_repeats(code, before, after, notes)
    indent = _indent_of(old) if old.strip() else ""
    body = textwrap.dedent(code).strip("\n")
    if language == "python":
        body = _cut_off_tail(body, _required_defs(old, before + "\n" + after) if not indent else set(), notes)
        if not indent and marked:
            body = _drop_fixed_statements(body, before + "\n" + after, notes)
            body = _drop_usage(body, old, notes)
    if not body.strip():
        raise ParseError("the reply has no code for the block: answer with the block's new code in a fenced block")
    if _indent_of(code) != indent:
        notes.append("reindented")
    if indent:
        body = textwrap.indent(body, indent)
    return body + "\n", notes


@registry.mutation("block")
class BlockMutation(LLMMutation):
    """One EVOLVE-BLOCK's body rewritten and spliced back (see the module docstring)."""

    name = "block"
    edit_format = "block"
    _index = 0  # the region asked for; set per call on a copy (see ``propose``)

    async def propose(self, parent: Program, context: MutationContext, backend: Any) -> list[Candidate]:
        """As :meth:`LLMMutation.propose`, for one region drawn from ``context.rng``."""
        try:
            n_regions = len(find_blocks(parent.code))
        except ValueError as exc:
            reason = f"the parent's EVOLVE-BLOCK markers are broken: {exc}"
            return [self._failed(parent, [], reason) for _ in range(max(1, int(context.n)))]
        call = copy.copy(self)  # the region lives on a per-call copy: operators serve concurrent plans
        call._index = int(context.rng.integers(n_regions)) if n_regions > 1 else 0
        return await LLMMutation.propose(call, parent, context, backend)

    def messages(self, parent: Program, context: MutationContext) -> list[dict[str, str]]:
        blocks = find_blocks(parent.code)
        region = blocks[self._index]
        body = textwrap.dedent(parent.code[region.start:region.end]).strip("\n")
        label = "The block" if len(blocks) == 1 else f"Block {self._index + 1} of {len(blocks)}"
        settings = {**self.settings, **(context.settings or {})}
        return build_prompt(parent, context.parent_result, list(context.inspirations), edit_format="block",
                            settings=settings, extra={"block": body, "block_label": label})

    def parse(self, reply: str, parent: Program, others: list[Program]) -> tuple[str, dict[str, Any]]:
        if "SEARCH" in reply and "REPLACE" in reply:
            salvaged = as_diff(reply, parent)
            if salvaged is not None:
                return salvaged
        body, notes = body_from_reply(reply, parent.code, self._index, parent.language)
        blocks = find_blocks(parent.code)
        old = parent.code[blocks[self._index].start:blocks[self._index].end]
        if body.strip() == old.strip():
            raise ParseError("the new block is the same as the parent's")
        fixed = parent.code[:blocks[self._index].start] + parent.code[blocks[self._index].end:]
        wanted, got = _required_defs(old, fixed), _public_defs(textwrap.dedent(body))
        if not _indent_of(old) and wanted and got == set():
            wrapped = _under_parent_header(old, body)
            if wrapped is not None:  # the model wrote the body of the region's one function
                body, got = wrapped, wanted
                notes.append("function_body")
        if not _indent_of(old):
            body = _rename_lone_function(old, body, wanted, notes)
            body = _restore_signatures(old, body, notes)
            got = _public_defs(textwrap.dedent(body))
        if not _indent_of(old) and wanted and got is not None:  # unparsable: the syntax check says why
            missing = sorted(wanted - got)
            if missing:
                raise ParseError(f"the new block does not define {', '.join(missing)} (defined in the parent's "
                                 "block; the evaluator or the fixed code may call it)")
        bodies = [parent.code[b.start:b.end] for b in blocks]
        bodies[self._index] = body
        meta: dict[str, Any] = {"block": self._index}
        if notes:
            meta["cleaned"] = notes
        return splice_blocks(parent.code, bodies), meta
