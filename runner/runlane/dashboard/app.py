"""The dashboard's ASGI application: server-rendered pages (usable without JavaScript),
server-sent events for the live parts, static files (uPlot, our script and style).

Safe by default: every template is autoescaped and live data reaches the page as JSON
that the script inserts as text; message and output text is shown only with
`show_content`; the Stop button (cancel_run) exists only with `allow_actions`, and its
form carries a per-process key that another site cannot read (no cross-site Stop). With
a token every request needs it (a bearer header, or the cookie a `?token=` visit sets);
without one, only loopback Host headers are served (no DNS rebinding).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import re
import secrets
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import psycopg
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import (
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from . import queries
from .hub import Hub

HERE = Path(__file__).parent
COOKIE = "runlane_dashboard_token"
KEEPALIVE = 15.0  # seconds between SSE comments on a quiet stream
TERMINAL = {"succeeded", "failed", "canceled", "skipped"}
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]
AGENTS_PER_PAGE = 100
AGENT_STATUSES = ["scheduled", "manual", "off", "locked", "no_model"]  # agent_page's
RUNS_PER_PAGE = 100
RUN_STATES = ["failed", "running", "queued", "succeeded", "canceled", "skipped"]  # runs_page's
LANES = ["interactive", "background"]
# The seed's five durations of a run, in the order a person reads them.
DURATIONS = [
    ("run.pre_run_wait_ms", "pre-run wait", "message to run created"),
    ("run.queue_wait_ms", "queue wait", "run created to first start"),
    ("run.first_response_ms", "first response", "message to first visible output"),
    ("run.execution_wall_ms", "execution", "first start to finish"),
    ("run.total_ms", "total", "message to finish"),
]
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        b"img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal | timedelta):
        return str(value)
    raise TypeError(type(value).__name__)


def to_json(value: Any) -> str:
    return json.dumps(value, default=_json_default, separators=(",", ":"))


def fmt_ms(ms: int | None) -> str:
    if ms is None:
        return "–"
    if ms < 1000:
        return f"{ms} ms"
    if ms < 120_000:
        return f"{ms / 1000:.1f} s"
    if ms < 7_200_000:
        return f"{ms / 60_000:.1f} min"
    return f"{ms / 3_600_000:.1f} h"


def fmt_time(value: datetime | None) -> str:
    return "–" if value is None else value.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


# A run or output id as the address gives it: ASCII digits only (str.isdigit() also takes
# "²" and other digits that int() refuses), at most a bigint.
_ID = re.compile(r"[0-9]{1,19}")


def whole_number(raw: str) -> int | None:
    """The non-negative bigint `raw` spells in ASCII digits, else None."""
    if not _ID.fullmatch(raw):
        return None
    value = int(raw)
    return value if value < 2**63 else None


def agent_view(row: dict[str, Any]) -> dict[str, Any]:
    """An agent_page row as the agents page shows it: its newest run apart (or None)."""
    view = {k: v for k, v in row.items() if not k.startswith("last_")}
    view["last"] = (
        None
        if row["last_run_id"] is None
        else {
            "run_id": row["last_run_id"],
            "created_at": row["last_created_at"],
            "lane": row["last_lane"],
            "trigger": row["last_trigger"],
            "state": row["last_state"],
            "reason": row["last_reason"],
        }
    )
    return view


def series(
    minutes: list[dict[str, Any]] | None, failures: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """lane_minutes rows as the charts' columns: x (epoch seconds of each minute's end)
    and, per lane, queued, p50, p90, p99; failure_minutes rows as fx, failed, reaped."""
    out: dict[str, Any] = {"x": [], "interactive": {}, "background": {}}
    out["failures"] = {
        "x": [int(r["minute_end"].timestamp()) for r in failures or []],
        "failed": [r["failed"] for r in failures or []],
        "reaped": [r["reaped"] for r in failures or []],
    }
    for lane in ("interactive", "background"):
        rows = [r for r in minutes or [] if r["lane"] == lane]
        if lane == "interactive":
            out["x"] = [int(r["minute_end"].timestamp()) for r in rows]
        for key in ("queued", "first_responses", "p50_ms", "p90_ms", "p99_ms"):
            out[lane][key] = [r[key] for r in rows]
    return out


class Guard:
    """ASGI middleware: the token (when set) on every request, security headers on every
    response. A `?token=` visit with the right token gets the cookie and a redirect to
    the same page without the token in its address."""

    def __init__(self, app, token: str | None):
        self.app, self.token = app, token

    def _authorized(self, scope) -> bool:
        if self.token is None:
            return True
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        offered = []
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            offered.append(auth[7:].strip())
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE:
                offered.append(value)
        return any(hmac.compare_digest(o.encode(), self.token.encode()) for o in offered)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def secured(message):
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + SECURITY_HEADERS
            await send(message)

        if not self._authorized(scope):
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            given = (query.get("token") or [""])[0]
            if (
                self.token is not None
                and given
                and hmac.compare_digest(given.encode(), self.token.encode())
            ):
                response: Response = RedirectResponse(scope["path"], status_code=303)
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict", path="/")
            else:
                response = PlainTextResponse(
                    "runlane dashboard: a token is required (open /?token=... once, or send "
                    "'Authorization: Bearer ...').\n",
                    status_code=401,
                )
            return await response(scope, receive, secured)
        return await self.app(scope, receive, secured)


def create_app(
    dsn: str,
    *,
    token: str | None = None,
    allow_actions: bool = False,
    show_content: bool = False,
    loopback_only: bool = True,
    queue_delay_threshold: float = 30.0,
    tick: float = 1.0,
) -> Starlette:
    """The dashboard for the database at `dsn` (a runlane_api login is enough)."""
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    env = templates.env
    env.autoescape = True  # every page escapes what it renders, whatever the file name
    env.filters.update(ms=fmt_ms, time=fmt_time)
    env.globals.update(allow_actions=allow_actions, show_content=show_content)
    action_key = secrets.token_urlsafe(24)
    pool = AsyncConnectionPool(dsn, min_size=1, max_size=4, open=False, kwargs={"autocommit": True})
    hub = Hub(dsn, pool, tick=tick, threshold=timedelta(seconds=queue_delay_threshold))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await pool.open()
        hub.start()
        try:
            yield
        finally:
            await hub.stop()
            await pool.close()

    def page(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    def refused(request: Request, exc: psycopg.Error) -> Response:
        if exc.sqlstate == "RL008":
            return page(
                request,
                "error.html",
                404,
                title="Not found",
                message="No such agent or run (or not one this login may see).",
            )
        return page(
            request,
            "error.html",
            503,
            title="Database error",
            message=f"The database refused the read ({exc.sqlstate or 'no SQLSTATE'}).",
        )

    async def overview(request: Request) -> Response:
        try:
            snapshot, minutes, failures = await hub.read_all()
            unserved = await hub.rows(queries.UNSERVED)
        except psycopg.Error as exc:
            return refused(request, exc)
        return page(
            request,
            "overview.html",
            title="Overview",
            active="overview",
            lanes=snapshot["lanes"],
            delay=snapshot["delay"],
            unserved=unserved,
            minutes=minutes,
            chart=series(minutes, failures),
        )

    async def organizations(request: Request) -> Response:
        try:
            orgs = await hub.rows(queries.ORGS)
            owners = await hub.rows(queries.OWNERS)
        except psycopg.Error as exc:
            return refused(request, exc)
        for org in orgs:
            org["owners"] = [o for o in owners if o["org_id"] == org["org_id"]]
        return page(request, "orgs.html", title="Organizations", active="orgs", orgs=orgs)

    async def agents(request: Request) -> Response:
        q = request.query_params.get("q", "").strip()
        status = request.query_params.get("status", "")
        status = status if status in AGENT_STATUSES else ""
        start = request.query_params.get("from") or None
        try:
            rows = await hub.rows(
                queries.AGENT_PAGE,
                {
                    "from": start,
                    "limit": AGENTS_PER_PAGE + 1,
                    "match": q or None,
                    "status": status or None,
                },
            )
        except psycopg.Error as exc:
            return refused(request, exc)
        # one more than a page was asked for: the extra agent starts the next page
        following = rows[AGENTS_PER_PAGE]["agent_id"] if len(rows) > AGENTS_PER_PAGE else None
        shown = [agent_view(r) for r in rows[:AGENTS_PER_PAGE]]
        return page(
            request,
            "agents.html",
            title="Agents",
            active="agents",
            agents=shown,
            q=q,
            status=status,
            statuses=AGENT_STATUSES,
            start=start,
            following=following,
        )

    async def agent(request: Request) -> Response:
        agent_id = request.path_params["agent_id"]
        try:
            journal = await hub.rows(queries.JOURNAL, {"agent": agent_id, "limit": 100})
            found = await hub.rows(
                queries.AGENT_PAGE, {"from": agent_id, "limit": 1, "match": None, "status": None}
            )
        except psycopg.Error as exc:
            return refused(request, exc)
        schedule = next((r for r in found if r["agent_id"] == agent_id), None)
        return page(
            request,
            "agent.html",
            title=f"Agent {agent_id}",
            active="agents",
            agent_id=agent_id,
            schedule=schedule,
            journal=journal,
        )

    async def runs(request: Request) -> Response:
        """The runs page; with ?id= a run lookup."""
        if "id" in request.query_params:
            return await run_lookup(request)
        params = request.query_params
        state = params.get("state", "failed")
        state = state if state in RUN_STATES else ""
        lane = params.get("lane", "")
        lane = lane if lane in LANES else ""
        org = params.get("org", "").strip()
        agent_id = params.get("agent", "").strip()
        thread = params.get("thread", "").strip() if agent_id else ""
        try:
            rows = await hub.rows(
                queries.RUNS_PAGE,
                {
                    "state": state or None,
                    "lane": lane or None,
                    "org": org or None,
                    "agent": agent_id or None,
                    "thread": thread or None,
                    "limit": RUNS_PER_PAGE,
                },
            )
        except psycopg.Error as exc:
            return refused(request, exc)
        return page(
            request,
            "runs.html",
            title="Runs",
            active="runs",
            runs=rows,
            state=state,
            lane=lane,
            org=org,
            agent=agent_id,
            thread=thread,
            states=RUN_STATES,
            lanes=LANES,
            per_page=RUNS_PER_PAGE,
            refresh=state in ("running", "queued"),
        )

    async def workers(request: Request) -> Response:
        try:
            rows = await hub.rows(queries.WORKERS)
        except psycopg.Error as exc:
            return refused(request, exc)
        return page(
            request, "workers.html", title="Workers", active="workers", workers=rows, refresh=True
        )

    async def run_lookup(request: Request) -> Response:
        run_id = whole_number(request.query_params.get("id", "").strip())
        if not run_id:
            return page(
                request,
                "error.html",
                400,
                title="Bad run id",
                message="A run id is a positive whole number (digits 0-9).",
            )
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    def output_view(row: dict[str, Any]) -> dict[str, Any]:
        return {
            "output_id": row["output_id"],
            "attempt": row["attempt"],
            "kind": row["kind"],
            "created_at": row["created_at"],
            "chars": len(row["body"]),
            "body": row["body"] if show_content else None,
        }

    async def run(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        if not 0 < run_id < 2**63:
            return page(request, "error.html", 404, title="Not found", message="No such run.")
        try:
            status = (await hub.rows(queries.RUN_STATUS, {"run": run_id}))[0]
            timing = (await hub.rows(queries.RUN_TIMING, {"run": run_id}))[0]["timing"]
            detail = (await hub.rows(queries.RUN_DETAIL, {"run": run_id}))[0]
            reply = (await hub.rows(queries.RUN_REPLY, {"run": run_id}))[0]
            outputs = await hub.rows(queries.OUTPUTS, {"run": run_id, "after": 0, "limit": 500})
        except psycopg.Error as exc:
            return refused(request, exc)
        shown = [output_view(o) for o in outputs]
        return page(
            request,
            "run.html",
            title=f"Run {run_id}",
            active="runs",
            run_id=run_id,
            status=status,
            timing=timing,
            detail=detail,
            reply=reply,
            durations=DURATIONS,
            outputs=shown,
            last_output_id=shown[-1]["output_id"] if shown else 0,
            more=len(outputs) == 500,
            terminal=status["state"] in TERMINAL,
            action_key=action_key,
        )

    async def stop(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        if not 0 < run_id < 2**63:
            return PlainTextResponse("no such run\n", status_code=404)
        if not allow_actions:
            return PlainTextResponse(
                "actions are off (start with --allow-actions)\n", status_code=403
            )
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        key = (form.get("key") or [""])[0]
        if not hmac.compare_digest(key.encode(), action_key.encode()):
            return PlainTextResponse(
                "stale or foreign form: reload the run page\n", status_code=403
            )
        try:
            await hub.rows(queries.CANCEL, {"run": run_id})
        except psycopg.Error as exc:
            return refused(request, exc)
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    def sse(event: str, data: Any, event_id: int | None = None) -> str:
        head = f"id: {event_id}\n" if event_id is not None else ""
        return f"{head}event: {event}\ndata: {to_json(data)}\n\n"

    async def overview_events(request: Request) -> Response:
        async def stream():
            async with hub.watch_overview() as topic:
                seen, sent_minutes = None, None
                yield "retry: 1000\n\n"
                while True:
                    if hub.snapshot is not None and topic.version != seen:
                        seen = topic.version
                        data = dict(hub.snapshot)
                        if hub.minutes is not None and hub.minutes_version != sent_minutes:
                            sent_minutes = hub.minutes_version
                            data["chart"] = series(hub.minutes, hub.failures)
                        yield sse("overview", data)
                    elif not await topic.wait(topic.version, KEEPALIVE):
                        yield ": keepalive\n\n"

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"cache-control": "no-store"}
        )

    async def run_events(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        if not 0 < run_id < 2**63:
            return PlainTextResponse("no such run\n", status_code=404)
        # Where the stream resumes: the browser's Last-Event-ID (the last output id it got)
        # or ?after=; anything but a whole number is refused, never read as 0.
        raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        after = whole_number(raw.strip())
        if after is None:
            return PlainTextResponse(
                "Last-Event-ID and ?after= are an output id: a whole number (digits 0-9)\n",
                status_code=400,
            )
        try:
            first = (await hub.rows(queries.RUN_STATUS, {"run": run_id}))[0]
        except psycopg.Error as exc:
            return refused(request, exc)

        async def stream():
            async with hub.watch_run(run_id) as topic:
                last, sent, status = after, None, first
                yield "retry: 1000\n\n"
                while True:
                    seen = topic.version
                    status = topic.status or status  # read BEFORE paging: see stream.py
                    while True:
                        rows = await hub.rows(
                            queries.OUTPUTS, {"run": run_id, "after": last, "limit": 500}
                        )
                        for row in rows:
                            last = row["output_id"]
                            yield sse("output", output_view(row), last)
                        if len(rows) < 500:
                            break
                    if status != sent:
                        sent = status
                        yield sse("status", status)
                    if status["state"] in TERMINAL:
                        yield sse("end", {"last_output_id": last})
                        return
                    if not await topic.wait(seen, KEEPALIVE):
                        yield ": keepalive\n\n"

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"cache-control": "no-store"}
        )

    routes = [
        Route("/", overview),
        Route("/orgs", organizations),
        Route("/agents", agents),
        Route("/agents/{agent_id:path}", agent),
        Route("/runs", runs),
        Route("/workers", workers),
        Route("/runs/{run_id:int}", run),
        Route("/runs/{run_id:int}/stop", stop, methods=["POST"]),
        Route("/events/overview", overview_events),
        Route("/events/runs/{run_id:int}", run_events),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    middleware = [Middleware(Guard, token=token)]
    if loopback_only and token is None:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=LOOPBACK_HOSTS))
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.hub = hub
    return app
