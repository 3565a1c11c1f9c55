"""The Starlette application: pages, JSON API, local static files and security headers.

Security: every response carries a Content-Security-Policy that allows scripts, styles,
images and connections from this server only (no inline script, no ``eval``, no inline
style attributes, no frames), ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy:
no-referrer``. Bound to a loopback address, the server also refuses requests whose ``Host``
is not a loopback name, so a web page elsewhere cannot read it through DNS rebinding.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from qdevolve.errors import QdevolveError
from qdevolve.serve import api, pages
from qdevolve.serve import queries as Q
from qdevolve.serve.assets import missing_assets, vendor_dir
from qdevolve.serve.db import ReadOnlyDB
from qdevolve.serve.render import pygments_css
from qdevolve.serve.tree import LineageCache

__all__ = ["create_app", "warm_up", "CSP", "LOOPBACK_HOSTS"]

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]
_STATIC = Path(__file__).resolve().parent / "static"


class SecurityHeaders:
    """Adds the CSP and companion headers to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        # pages and API answers are never stored (they change as the run writes); static files
        # may be kept and revalidated (ETag), which lets the browser reuse its compiled scripts
        cache = b"no-cache" if scope["path"].startswith("/static/") else b"no-store"

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"),
                            (b"cache-control", cache)]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _error(request: Request, status: int, message: str) -> Response:
    if request.url.path.startswith("/api"):
        return api.json_response({"error": message}, status)
    return pages.render_error(request, status, message)


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error(request, 404, str(exc) if isinstance(exc, Q.NotFound) else f"no page at {request.url.path}")


async def _bad_request(request: Request, exc: Exception) -> Response:
    return _error(request, 400, str(exc))


async def _db_error(request: Request, exc: Exception) -> Response:
    return _error(request, 500, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


#: What reading a crafted or damaged database can raise: answered with one clear line (422,
#: or 503 for a query stopped by the time bound), never a traceback.
DATA_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, KeyError, IndexError, AttributeError,
                                                 OverflowError, ArithmeticError, RecursionError, sqlite3.Error,
                                                 SQLAlchemyError)


async def _data_error(request: Request, exc: Exception) -> Response:
    from qdevolve.db._untrusted import INTERRUPTED, interrupted_message

    label = request.app.state.db.label
    text = str(getattr(exc, "orig", None) or exc)
    if INTERRUPTED in text or "statement timeout" in text:
        return _error(request, 503, interrupted_message(label))
    detail = " ".join(text.split())[:200]
    return _error(request, 422, f"{label}: holds something the viewer cannot show ({type(exc).__name__}: "
                                f"{detail}); the database is damaged or crafted")


def _pygments(request: Request) -> Response:
    return Response(pygments_css(), media_type="text/css")


def _no_icon(request: Request) -> Response:
    return Response(status_code=204)


def create_app(db: str | ReadOnlyDB, *, poll_s: float = 2.0, allowed_hosts: list[str] | None = None,
               warm: bool = True) -> Starlette:
    """The viewer's ASGI app over ``db`` (a path, URL or open :class:`ReadOnlyDB`).

    Args:
        db: The database, opened read-only.
        poll_s: How often open pages ask whether the run changed (seconds).
        allowed_hosts: ``Host`` header values accepted (``None``: any).
        warm: Build the newest run's lineage in a background thread at start.

    Raises:
        QdevolveError: the database cannot be opened, or the chart library was not fetched.
    """
    missing = missing_assets()
    if missing:
        raise QdevolveError(f"qdevolve serve: {', '.join(missing)} missing or altered in {vendor_dir()}; "
                            "fetch the pinned browser assets with 'python -m qdevolve.serve.assets' (uses npm)")
    handle = db if isinstance(db, ReadOnlyDB) else ReadOnlyDB(db)
    middleware = [Middleware(SecurityHeaders)]
    if allowed_hosts:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts))
    app = Starlette(
        routes=[*pages.routes(), *api.routes(), Route("/static/pygments.css", _pygments),
                Route("/favicon.ico", _no_icon),
                Mount("/static/vendor", StaticFiles(directory=vendor_dir()), name="vendor"),
                Mount("/static", StaticFiles(directory=_STATIC), name="static")],
        middleware=middleware,
        exception_handlers={404: _not_found, Q.NotFound: _not_found, api.BadRequest: _bad_request,
                            QdevolveError: _db_error, **{e: _data_error for e in DATA_ERRORS}},
    )
    app.state.db = handle
    app.state.poll_s = float(poll_s)
    app.state.lineage = LineageCache(handle)
    if warm:
        threading.Thread(target=_warm, args=(app,), name="qdevolve-serve-warm", daemon=True).start()
    return app


def warm_up(app: Starlette) -> str | None:
    """Build the newest run's lineage now, so the first page of it is served from the cache.

    Returns the run id (``None`` for a database with no runs). ``qdevolve serve`` calls this
    before it prints its URL.
    """
    try:
        run = Q.resolve_run(app.state.db, None)
    except Q.NotFound:
        return None
    app.state.lineage.get(run["id"])
    return run["id"]


def _warm(app: Starlette) -> None:
    try:
        warm_up(app)
    except Exception as exc:  # noqa: BLE001 - the request that needs it reports the error
        logging.getLogger(__name__).debug("warm-up failed: %s", exc)

