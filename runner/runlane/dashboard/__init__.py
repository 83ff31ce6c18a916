"""`runlane dashboard`: the operator's web page.

Starlette + uvicorn + Jinja2, uPlot shipped in static/ (no CDN at run time). Reads only
through functions runlane_api may execute; one LISTEN connection per process (hub.py).
Binds 127.0.0.1 unless told otherwise, and refuses a non-loopback address without a token.
"""

from __future__ import annotations

import ipaddress

from .app import create_app

__all__ = ["create_app", "is_loopback", "serve"]


def is_loopback(host: str) -> bool:
    """Whether `host` only ever accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def serve(
    dsn: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8780,
    token: str | None = None,
    allow_actions: bool = False,
    show_content: bool = False,
    queue_delay_threshold: float = 30.0,
) -> None:
    """Serve the dashboard until SIGINT/SIGTERM. Raises ValueError for a non-loopback
    host without a token (nothing is bound then)."""
    import uvicorn

    from .. import log

    if not is_loopback(host) and not token:
        raise ValueError(
            f"refusing to serve on {host}, which is not a loopback address, without a token: "
            "pass --token or set RUNLANE_DASHBOARD_TOKEN"
        )
    app = create_app(
        dsn,
        token=token or None,
        allow_actions=allow_actions,
        show_content=show_content,
        loopback_only=is_loopback(host),
        queue_delay_threshold=queue_delay_threshold,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    log.get().info(
        "dashboard.starting",
        **{
            "dashboard.host": host,
            "dashboard.port": port,
            "dashboard.token": bool(token),
            "dashboard.actions": allow_actions,
            "dashboard.content": show_content,
        },
    )
    server.run()
