"""``qdevolve serve``: browse a run database in a web browser (read-only)."""

from __future__ import annotations

import ipaddress
import socket

import click

from qdevolve.errors import ConfigError
from qdevolve.textsafe import terminal_safe_line

__all__ = ["serve"]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@click.command()
@click.option("--db", "db", envvar="QDEVOLVE_DB", required=True,
              help="Run database: a SQLite path or a PostgreSQL URL (env QDEVOLVE_DB). Opened read-only.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but a loopback address exposes the runs to the network.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="Port to bind (0: any free port; the URL is printed).")
@click.option("--poll", "poll_s", default=2.0, show_default=True, type=click.FloatRange(0.25, 3600),
              help="Seconds between the open pages' checks for new programs.")
def serve(db: str, host: str, port: int, poll_s: float) -> None:
    """Serve a read-only web viewer of a run database: lineage tree, programs, archive, policy.

    Pages update live while a run writes to the database. Stop with Ctrl-C.
    """
    import uvicorn

    from qdevolve.db import display_target
    from qdevolve.serve import create_app
    from qdevolve.serve.app import LOOPBACK_HOSTS, warm_up

    loopback = _is_loopback(host)
    app = create_app(db, poll_s=poll_s, allowed_hosts=LOOPBACK_HOSTS if loopback else None, warm=False)
    try:
        warm_up(app)  # the newest run's lineage is ready before the URL is shown
    except Exception as exc:  # noqa: BLE001 - a crafted database: its pages show the error
        click.echo(f"warning: {terminal_safe_line(display_target(db))}: the newest run's lineage cannot be built "
                   f"({type(exc).__name__}); its pages will say why", err=True)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"--host {host} --port {port}: cannot bind ({exc.strerror}); "
                          "pick another --port (0 for any free one)") from None
    bound = sock.getsockname()[1]
    if not loopback:
        click.echo(f"warning: serving on {host}, reachable from other machines; the viewer has no "
                   "authentication and shows every program, prompt and reply in the database", err=True)
    shown = f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host
    click.echo(f"qdevolve serve: {terminal_safe_line(display_target(db))} (read-only) at http://{shown}:{bound}/", err=False)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        app.state.db.close()
