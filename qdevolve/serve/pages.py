"""The HTML pages. Templates are autoescaped; JavaScript reads its inputs from ``data-*``
attributes and the JSON API, never from inline script (the Content-Security-Policy forbids it)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from qdevolve.serve import queries as Q
from qdevolve.serve.render import highlight_code, highlight_diff, tail
from qdevolve.serve.tasks_view import task_view
from qdevolve.serve.templates_view import template_of, templates_view
from qdevolve.textsafe import strip_surrogates

__all__ = ["routes", "render_error"]

_ENV = Environment(loader=PackageLoader("qdevolve.serve", "templates"),
                   autoescape=select_autoescape(default=True, default_for_string=True))


def _when(ts: Any) -> str:
    try:
        return dt.datetime.fromtimestamp(float(ts), dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (TypeError, ValueError, OverflowError):
        return "-"


def _num(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return "-" if v is None else str(v)
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _pretty(v: Any) -> str:
    if isinstance(v, str):
        return strip_surrogates(v)
    return strip_surrogates(json.dumps(v, indent=2, ensure_ascii=False, default=str))


_ENV.filters.update(when=_when, num=_num, pretty=_pretty, short=lambda s: str(s)[:12])


def _page(request: Request, template: str, status: int = 200, **ctx: Any) -> HTMLResponse:
    state = request.app.state
    html = _ENV.get_template(template).render(database=state.db.label, poll_ms=int(state.poll_s * 1000), **ctx)
    return HTMLResponse(html, status_code=status)


def render_error(request: Request, status: int, message: str) -> Response:
    """An HTML error page (the message escaped like everything else)."""
    return _page(request, "error.html", status=status, code=status, message=message, run=None, page="error")


def tree_page(request: Request) -> Response:
    db = request.app.state.db
    ref = request.path_params.get("run") or request.query_params.get("run")
    run = None
    try:
        run = Q.resolve_run(db, ref)
    except Q.NotFound:
        if ref:
            raise
    return _page(request, "tree.html", run=run, page="tree")


def archive_page(request: Request) -> Response:
    run = Q.resolve_run(request.app.state.db, request.path_params["run"])
    return _page(request, "archive.html", run=run, page="archive")


def policy_page(request: Request) -> Response:
    db = request.app.state.db
    run = Q.resolve_run(db, request.path_params["run"])
    has_policy = bool(Q.policy_versions(db, run["id"]))  # none: say so, draw no empty charts
    return _page(request, "policy.html", run=run, page="policy", has_policy=has_policy)


def templates_page(request: Request) -> Response:
    db = request.app.state.db
    run = Q.resolve_run(db, request.path_params["run"])
    return _page(request, "templates.html", run=run, page="templates", view=templates_view(db, run["id"]))


def program_page(request: Request) -> Response:
    db = request.app.state.db
    pid = Q.resolve_program(db, request.path_params["program"])
    p = Q.program_detail(db, pid)
    run = Q.resolve_run(db, p["run_id"])
    last = p["evaluations"][-1] if p["evaluations"] else None
    artifacts = []
    if last and isinstance(last.get("artifacts"), dict):
        for key, value in last["artifacts"].items():
            text, cut = tail(value)
            artifacts.append({"key": key, "text": text, "cut": cut})
    diffs = [{"parent": e, "html": Markup(highlight_diff(e.get("code") or "", p["code"], f"parent {str(e['parent_id'])[:12]}",
                                                          f"program {pid[:12]}"))} for e in p["parents"]]
    tests = []
    if last and isinstance(last.get("tests"), list):
        for i, t in enumerate(last["tests"]):
            v = t if isinstance(t, (int, float)) and not isinstance(t, bool) else None
            level = None if v is None else int(min(max(v, 0.0), 1.0) * 4 + 0.5)
            tests.append({"i": i, "value": t, "level": level})
    extra_cols = [k for k in (last or {}) if k not in {"id", "program_id", "run_id", "status", "score", "metrics",
                                                        "tests", "features", "artifacts", "error", "created_at"}]
    return _page(request, "program.html", run=run, page="program", p=p, last=last, artifacts=artifacts, diffs=diffs,
                 tests=tests, extra_cols=extra_cols, tasks=task_view(db, p), code_html=Markup(highlight_code(p["code"], p.get("language"))),
                 ancestors=Q.ancestors(db, pid), children=Q.children(db, pid), template_id=template_of(p))


def routes() -> list[Route]:
    return [Route("/", tree_page), Route("/runs/{run}", tree_page), Route("/runs/{run}/archive", archive_page),
            Route("/runs/{run}/policy", policy_page), Route("/runs/{run}/templates", templates_page),
            Route("/programs/{program}", program_page)]
