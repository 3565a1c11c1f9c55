"""The JSON API behind the pages (``/api/...``), documented in ``docs/serve.md`` and at ``/api``.

Every endpoint is a GET, reads the database read-only and answers JSON; an unknown run or
program is a 404 ``{"error": "..."}``, a bad query parameter a 400. Run and program ids may be
given as unique prefixes. Floats that JSON cannot carry (NaN, infinities) are sent as ``null``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from qdevolve.serve import queries as Q
from qdevolve.serve.archive_view import archive_view
from qdevolve.serve.policy_view import policy_view
from qdevolve.serve.tasks_view import task_view
from qdevolve.serve.templates_view import templates_view
from qdevolve.serve.tree import DEFAULT_LIMIT, MAX_LIMIT, TreeQuery

__all__ = ["ENDPOINTS", "routes", "json_response", "BadRequest"]


class BadRequest(ValueError):
    """A query parameter is malformed."""


def _clean(x: Any) -> Any:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def json_response(data: Any, status: int = 200) -> Response:
    """A JSON response with NaN/inf as null and non-ASCII kept."""
    body = json.dumps(_clean(data), ensure_ascii=False, separators=(",", ":"), default=str)
    return Response(body, status_code=status, media_type="application/json")


def _int(request: Request, name: str, default: int | None = None, lo: int | None = None,
         hi: int | None = None) -> int | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        v = int(raw)
    except ValueError:
        raise BadRequest(f"query parameter {name}={raw!r}: expected an integer") from None
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise BadRequest(f"query parameter {name}={v}: expected {lo}..{hi}")
    return v


def _set(request: Request, name: str) -> frozenset[str]:
    vals = [v for raw in request.query_params.getlist(name) for v in raw.split(",")]
    return frozenset(v.strip() for v in vals if v.strip())


def tree_query(request: Request) -> TreeQuery:
    """A :class:`TreeQuery` from ``limit, status, operator, gen_min, gen_max, pv, root``."""
    pvs = _set(request, "pv")
    try:
        pv = frozenset(int(v) for v in pvs)
    except ValueError:
        raise BadRequest(f"query parameter pv={','.join(sorted(pvs))!r}: expected integers") from None
    return TreeQuery(limit=_int(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT) or DEFAULT_LIMIT,
                     statuses=_set(request, "status"), operators=_set(request, "operator"),
                     gen_min=_int(request, "gen_min"), gen_max=_int(request, "gen_max"), policy_versions=pv,
                     root=request.query_params.get("root") or None)


# ------------------------------------------------------------------ endpoints
def api_index(request: Request) -> Response:
    return json_response({"endpoints": [{"path": p, "description": d} for p, d in ENDPOINTS]})


def api_runs(request: Request) -> Response:
    return json_response({"database": request.app.state.db.label, "runs": Q.list_runs(request.app.state.db)})


def api_run(request: Request) -> Response:
    db = request.app.state.db
    run = Q.resolve_run(db, request.path_params["run"])
    return json_response({**run, "stamp": Q.run_stamp(db, run["id"])})


def api_stamp(request: Request) -> Response:
    db = request.app.state.db
    run = Q.resolve_run(db, request.path_params["run"])
    return json_response(Q.run_stamp(db, run["id"]))


def api_tree(request: Request) -> Response:
    db = request.app.state.db
    run = Q.resolve_run(db, request.path_params["run"])
    out = request.app.state.lineage.select(run["id"], tree_query(request))
    return json_response({"run_id": run["id"], "run_name": run["name"], **out})


def api_archive(request: Request) -> Response:
    db = request.app.state.db
    return json_response(archive_view(db, Q.resolve_run(db, request.path_params["run"])))


def api_policy(request: Request) -> Response:
    db = request.app.state.db
    return json_response(policy_view(db, Q.resolve_run(db, request.path_params["run"])))


def api_templates(request: Request) -> Response:
    db = request.app.state.db
    return json_response(templates_view(db, Q.resolve_run(db, request.path_params["run"])["id"]))


def api_program(request: Request) -> Response:
    db = request.app.state.db
    pid = Q.resolve_program(db, request.path_params["program"])
    p = Q.program_detail(db, pid)
    p["tasks"] = task_view(db, p)
    p["parents"] = [{k: v for k, v in e.items() if k != "code"} for e in p["parents"]]
    p["ancestors"] = Q.ancestors(db, pid)
    p["children"] = Q.children(db, pid)
    return json_response(p)


def api_program_live(request: Request) -> Response:
    db = request.app.state.db
    pid = Q.resolve_program(db, request.path_params["program"])
    p = Q.program_detail(db, pid)
    last = p["evaluations"][-1] if p["evaluations"] else None
    return json_response({"id": pid, "evaluations": len(p["evaluations"]),
                          "status": last["status"] if last else None, "score": last["score"] if last else None,
                          "error": last.get("error") if last else None, "children": Q.children(db, pid)})


ENDPOINTS: list[tuple[str, str]] = [
    ("/api", "this list"),
    ("/api/runs", "every run: id, name, status, config, programs, evaluations, best_score"),
    ("/api/runs/{run}", "one run (id or unique prefix) with its stamp"),
    ("/api/runs/{run}/stamp", "counts and last ids; changes whenever the run writes (poll it)"),
    ("/api/runs/{run}/tree", "lineage tree cut to `limit` nodes; filters: status (ok, failed, pending or a "
                             "status name; comma-separated), operator, gen_min, gen_max, pv, root (focus subtree)"),
    ("/api/runs/{run}/archive", "current elites, the feature grid with real value bins, best-score and "
                                "QD-score curves against evaluations"),
    ("/api/runs/{run}/policy", "per policy version: loss, kl, entropy, D_n, pass@1, programs produced"),
    ("/api/runs/{run}/templates", "prompt templates (prompt: {evolve: true}) in tree order: parent, origin, "
                                  "status, children, fitness, text and the programs each made"),
    ("/api/programs/{program}", "one program: code, evaluations (metrics, tests, features, artifacts), "
                                "parents, archive events, rollouts (prompt, completion), ancestors, children; "
                                "an agent's per-task scores as `tasks` (scoring and held-out rows beside its "
                                "parent's; null for other programs)"),
    ("/api/programs/{program}/live", "latest status/score and children of a program (the page polls it)"),
]


def routes() -> list[Route]:
    return [
        Route("/api", api_index), Route("/api/runs", api_runs), Route("/api/runs/{run}", api_run),
        Route("/api/runs/{run}/stamp", api_stamp), Route("/api/runs/{run}/tree", api_tree),
        Route("/api/runs/{run}/archive", api_archive), Route("/api/runs/{run}/policy", api_policy),
        Route("/api/runs/{run}/templates", api_templates),
        Route("/api/programs/{program}", api_program), Route("/api/programs/{program}/live", api_program_live),
    ]
