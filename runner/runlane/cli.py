"""The `runlane` command line. Every option can also come from the environment:
`--dsn` from RUNLANE_DSN, any other from RUNLANE_<COMMAND>_<OPTION> (e.g.
RUNLANE_WORKER_AGENT, RUNLANE_WORKER_LANE="interactive background")."""

from __future__ import annotations

import asyncio
import sys

import click
import psycopg

from . import errors, eventloop, log
from .migrate import MigrationError, migrate

dsn_option = click.option(
    "--dsn", envvar="RUNLANE_DSN", required=True,
    help="PostgreSQL connection string (or $RUNLANE_DSN).")


@click.group(context_settings={"auto_envvar_prefix": "RUNLANE"})
def main() -> None:
    """runlane: durable, Postgres-native dispatch for AI-agent runs."""


# The role each command needs; a permission refusal names it (errors.missing_role).
API, WORKER = "runlane_api", "runlane_worker"


def fail(exc: BaseException, needs: str | None = None, dsn: str | None = None,
         also: str | None = None) -> None:
    """One line for the error and exit non-zero. `needs` is the role the command needs
    (`also`: another that does as well): a permission refusal (42501) then says which
    role to grant the login of `dsn` and the command that grants it."""
    if isinstance(exc, psycopg.Error):
        click.echo(errors.describe(exc), err=True)
        if needs is not None and dsn is not None:
            advice = errors.missing_role(exc, needs, errors.login_of(dsn), also)
            if advice is not None:
                click.echo(advice, err=True)
        sys.exit(errors.exit_code(exc))
    click.echo(f"error: {exc}", err=True)
    sys.exit(1)


@main.command("migrate")
@dsn_option
@click.option("--to", "to", type=int, default=None,
              help="Stop after this migration (e.g. --to 2 for a staged upgrade).")
@click.option("--lock-timeout", type=float, default=60.0, show_default=True,
              help="Seconds to wait for another migrator's lock; then fail naming its pid.")
def migrate_cmd(dsn: str, to: int | None, lock_timeout: float) -> None:
    """Apply pending migrations, then re-apply the functions."""
    try:
        with psycopg.connect(dsn) as conn:
            applied = migrate(conn, to=to, lock_timeout=lock_timeout)
    except (psycopg.Error, MigrationError) as exc:
        fail(exc)
    if applied:
        for m in applied:
            click.echo(f"applied {m.version:04d}_{m.name}")
    else:
        click.echo("schema is up to date")


@main.command("worker")
@dsn_option
@click.option("--lane", "lanes", multiple=True, required=True,
              type=click.Choice(["interactive", "background"]),
              help="Lane to serve; repeat for both (each lane has its own dispatcher).")
@click.option("--agent", "agent_spec", default="runlane.agents.echo:agent", show_default=True,
              help="The agent, as module:attr.")
@click.option("--worker-id", default="", help="Lease owner name (default host-pid-random).")
@click.option("--shutdown-grace", type=float, default=30.0, show_default=True,
              help="Seconds runs may finish after SIGTERM/SIGINT before they are released.")
@click.option("--memory-buffer-mb", type=int, default=64, show_default=True,
              help="Free memory (and process headroom) required before each claim.")
@click.option("--memory-probe", default=None,
              help="module:attr of a probe returning runlane.admission.Memory (tests, ops).")
@click.option("--lease", type=float, default=60.0, show_default=True,
              help="Lease seconds; heartbeats every third of it.")
@click.option("--scan-interval", type=float, default=5.0, show_default=True,
              help="Seconds between recovery scans of each lane.")
@click.option("--claim-batch", type=int, default=10, show_default=True,
              help="Runs per claim_runs() call.")
@click.option("--pool-size", type=int, default=10, show_default=True,
              help="Database connections per lane for run work (not a run cap).")
@click.option("--max-per-org", type=click.IntRange(0, 1_000_000), default=100, show_default=True,
              help="At most this many runs of one organization in flight on this worker, so "
                   "one organization's burst leaves room for the others' (0: no bound).")
@click.option("--maintenance/--no-maintenance", default=True, show_default=True,
              help="Take part in the maintenance leader election.")
@click.option("--tick-interval", type=float, default=5.0, show_default=True)
@click.option("--queue-delay-interval", type=float, default=30.0, show_default=True)
@click.option("--queue-delay-threshold", type=float, default=30.0, show_default=True)
@click.option("--leader-retry", type=float, default=3.0, show_default=True,
              help="Seconds between a follower's attempts to become maintenance leader.")
@click.option("--leader-ttl", type=float, default=None,
              help="Seconds the maintenance leader's lease lasts without renewal (1-3600, "
                   "longer than --tick-interval; default 3 x --tick-interval = 15); a "
                   "paused leader is replaced within leader-ttl + leader-retry seconds.")
@click.option("--notify-queue-warn", type=float, default=0.25, show_default=True,
              help="Log notify.queue_usage (once per maintenance pass) while the server's "
                   "NOTIFY queue is at least this full (runlane stops notifying at 0.5).")
@click.option("--retention", default=None,
              help="Delete runs finished longer ago than this (e.g. 30d, 240h, P30D; at "
                   "least 8 days) with their outputs, messages, charges and journal; the "
                   "maintenance leader purges in batches each pass. Off by default.")
@click.option("--deliveries", type=click.Choice(["direct", "legacy"]), default="direct",
              show_default=True,
              help="legacy: take run deliveries from run_jobs with the older generation's "
                   "statements (rolling upgrades); direct: claim runs (the default).")
@click.option("--metrics-port", type=int, default=None,
              help="Serve Prometheus metrics on this port at /metrics (needs prometheus_client).")
@click.option("--metrics-addr", default="127.0.0.1", show_default=True,
              help="Address the metrics endpoint binds to.")
def worker_cmd(dsn: str, lanes: tuple[str, ...], agent_spec: str, worker_id: str,
               shutdown_grace: float, memory_buffer_mb: int, memory_probe: str | None,
               lease: float, scan_interval: float, claim_batch: int, pool_size: int,
               max_per_org: int, maintenance: bool, tick_interval: float,
               queue_delay_interval: float, queue_delay_threshold: float, leader_retry: float,
               leader_ttl: float | None, notify_queue_warn: float, retention: str | None,
               deliveries: str,
               metrics_port: int | None, metrics_addr: str) -> None:
    """Listen, claim and execute runs until SIGTERM/SIGINT."""
    from .agents import load_agent
    from .maintenance import MaintenanceConfig
    from .retention import parse_window
    from .worker import WorkerConfig, serve

    log.configure()
    if deliveries == "legacy":
        _legacy_worker(dsn, worker_id, memory_probe, memory_buffer_mb)
        return
    try:
        agent = load_agent(agent_spec)
    except (ImportError, AttributeError, TypeError) as exc:
        click.echo(f"error: cannot load agent {agent_spec}: {exc}", err=True)
        sys.exit(1)
    try:
        window = parse_window(retention) if retention is not None else None
        maintenance_config = MaintenanceConfig(
            tick_interval, queue_delay_interval, queue_delay_threshold, leader_retry,
            leader_ttl=leader_ttl, notify_queue_warn=notify_queue_warn, retention=window)
    except ValueError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    config = WorkerConfig(
        dsn=dsn, lanes=list(dict.fromkeys(lanes)), agent=agent, worker_id=worker_id,
        shutdown_grace=shutdown_grace, memory_buffer_mb=memory_buffer_mb,
        memory_probe=memory_probe, lease=lease, scan_interval=scan_interval,
        claim_batch=claim_batch, pool_size=pool_size, max_per_org=max_per_org,
        maintenance=maintenance_config if maintenance else None)
    if metrics_port is not None:
        from .metrics import Metrics

        config.metrics = Metrics(dsn)
        config.metrics.serve(metrics_port, metrics_addr)
        log.get().info("metrics.serving", **{"metrics.port": metrics_port})
    eventloop.run(serve(config))


@main.command("grant-login")
@dsn_option
@click.argument("login")
@click.option("--api", "role", flag_value="api", help="Give LOGIN runlane_api (applications).")
@click.option("--worker", "role", flag_value="worker",
              help="Give LOGIN runlane_worker (workers; they act on every organization).")
@click.option("--org", default=None,
              help="With --api: LOGIN acts for this organization only. Without it, --api "
                   "lifts any earlier limit and LOGIN acts for every organization.")
def grant_login_cmd(dsn: str, login: str, role: str | None, org: str | None) -> None:
    """Give an existing login the runlane_api or runlane_worker role (run it as the
    schema owner or a superuser). `--api --org X` also limits the login to organization X
    in every runlane_api function (runlane.scope_api_login)."""
    from psycopg import sql

    if role is None:
        raise click.UsageError("say which role: --api or --worker")
    if org is not None and role != "api":
        raise click.UsageError("--org limits an API login; a worker acts on every organization")
    try:
        with psycopg.connect(dsn) as conn:
            if role == "api":
                # The scope first: it checks the login, the organization and that the
                # login is no worker; the grant then commits with it or not at all.
                conn.execute("select runlane.scope_api_login(%s::name, %s::text)", (login, org))
                conn.execute(sql.SQL("grant runlane_api to {}").format(sql.Identifier(login)))
            else:
                scoped = conn.execute("select org_id from runlane.api_scopes where login = %s",
                                      (login,)).fetchone()
                if scoped is not None:
                    raise RuntimeError(
                        f"login {login} is limited to organization {scoped[0]}; a worker acts "
                        "on every organization: use another login for workers")
                conn.execute(sql.SQL("grant runlane_worker to {}").format(sql.Identifier(login)))
    except (psycopg.Error, RuntimeError) as exc:
        fail(exc)
    if role == "worker":
        click.echo(f"{login}: runlane_worker")
    elif org is None:
        click.echo(f"{login}: runlane_api, every organization")
    else:
        click.echo(f"{login}: runlane_api, organization {org} only")


@main.command("tick")
@dsn_option
def tick_cmd(dsn: str) -> None:
    """One maintenance pass (tick and publish, reap_stale, redundant timer runs,
    queue delay), for cron or pg_cron; does nothing while a worker leads maintenance."""
    from .maintenance import one_pass

    log.configure()
    try:
        ok = asyncio.run(one_pass(dsn))
    except psycopg.Error as exc:
        fail(exc)
    if not ok:
        sys.exit(1)  # a step failed; its maintenance.step_failed line says which


def _publish(conn: psycopg.Connection, run_id: int) -> None:
    """Publication is its own transaction; its failure is harmless (the scan recovers)."""
    try:
        conn.execute("select runlane.publish_run(p_run_id => %s::bigint)", (run_id,))
    except psycopg.Error as exc:
        click.echo(f"warning: run {run_id} committed but not published "
                   f"({exc.sqlstate}); a worker's scan will start it", err=True)


@main.command("run-now")
@dsn_option
@click.argument("agent_id")
def run_now_cmd(dsn: str, agent_id: str) -> None:
    """Start AGENT's background run now (manual "Run now")."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            run_id, state, reason = conn.execute(
                "select run_id, state, reason from runlane.run_now(p_agent_id => %s::text)",
                (agent_id,)).fetchone()
            if state == "queued":
                _publish(conn, run_id)
    except psycopg.Error as exc:
        fail(exc, API, dsn)
    click.echo(f"run {run_id} {state}" + (f" ({reason})" if reason else ""))


@main.command("submit")
@dsn_option
@click.argument("agent_id")
@click.argument("thread_id")
@click.argument("text")
def submit_cmd(dsn: str, agent_id: str, thread_id: str, text: str) -> None:
    """Send TEXT to AGENT in THREAD (a chat message)."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            message_id, run_id, disposition = conn.execute(
                "select message_id, run_id, disposition from runlane.submit_message("
                "p_agent_id => %s::text, p_thread_id => %s::text, p_body => %s::text)",
                (agent_id, thread_id, text)).fetchone()
            if disposition == "created":
                _publish(conn, run_id)
    except psycopg.Error as exc:
        fail(exc, API, dsn)
    click.echo(f"message {message_id} {disposition}"
               + (f" run {run_id}" if run_id is not None else ""))


def _legacy_worker(dsn: str, worker_id: str, memory_probe: str | None,
                   memory_buffer_mb: int) -> None:
    """The older generation's delivery loop, with memory admission and SIGTERM drain."""
    import os
    import signal
    import threading

    from .admission import Admission, load_probe
    from .legacy import run_legacy_worker

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    admission = Admission(load_probe(memory_probe), memory_buffer_mb * 1024 * 1024)
    sys.exit(run_legacy_worker(dsn, worker_id or f"legacy-{os.getpid()}",
                               admission=admission, stop=stop))


@main.command("upgrade-status")
@dsn_option
def upgrade_status_cmd(dsn: str) -> None:
    """What still blocks the contract step (migration 0003); exit 0 when nothing does."""
    from .upgrade import upgrade_status

    try:
        with psycopg.connect(dsn) as conn:
            rows = upgrade_status(conn)
    except psycopg.Error as exc:
        fail(exc, WORKER, dsn)
    for row in rows:
        click.echo(f"{row['blocker']}: {row['detail']}")
    if not rows:
        click.echo("ready: nothing blocks the contract step")
    sys.exit(1 if rows else 0)


@main.command("demo")
def demo_cmd() -> None:
    """Show runlane at work: an embedded database, chat and scheduled runs, timing."""
    from .demo import main as demo_main

    try:
        demo_main(click.echo)
    except (psycopg.Error, TimeoutError, RuntimeError) as exc:
        fail(exc)


# -- operator views: the rules live in sql/functions/ops, these commands only render --
def _query(dsn: str, sql: str, params: tuple = ()) -> list[dict]:
    """The rows of one ops view; the views are runlane_api's (and runlane_worker's)."""
    from psycopg.rows import dict_row

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            return conn.cursor(row_factory=dict_row).execute(sql, params).fetchall()
    except psycopg.Error as exc:
        fail(exc, API, dsn, also=WORKER)
    raise AssertionError("unreachable")


def _emit_json(data: object) -> None:
    import json

    click.echo(json.dumps(data, default=lambda v: v.isoformat() if hasattr(v, "isoformat")
                          else str(v), indent=2))


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


@main.command("status")
@dsn_option
@json_option
def status_cmd(dsn: str, as_json: bool) -> None:
    """Lanes (queued, due, running, oldest wait), organizations' background capacity,
    and agents with their next run in their own timezone."""
    from .tables import render

    data = {
        "lanes": _query(dsn, "select * from runlane.lane_status()"),
        "organizations": _query(dsn, "select * from runlane.org_status()"),
        "agents": _query(dsn, "select * from runlane.agent_schedules()"),
    }
    if as_json:
        _emit_json(data)
        return
    click.echo(render("Lanes", ["lane", "queued", "due (waiting)", "running", "oldest wait ms"],
                      [[r["lane"], r["queued"], r["due"], r["running"], r["oldest_due_wait_ms"]]
                       for r in data["lanes"]]))
    click.echo()
    click.echo(render("Organizations (background lane)",
                      ["organization", "running", "queued", "agent_max_concurrency"],
                      [[r["org_id"], r["running_background"], r["queued_background"],
                        r["agent_max_concurrency"]] for r in data["organizations"]]))
    click.echo()
    click.echo(render("Agents", ["agent", "organization", "schedule", "timezone", "status",
                                 "next run (local)", "next run (UTC)"],
                      [[r["agent_id"], r["org_id"], r["schedule"] or "-", r["timezone"],
                        r["status"], r["next_run_local"], r["next_run_at"]]
                       for r in data["agents"]]))


@main.command("timing")
@dsn_option
@click.option("--since", default="1h", show_default=True,
              help="Window, as a PostgreSQL interval (1h, 30m, 2 days).")
@click.option("--trigger", default=None,
              type=click.Choice(["interactive", "manual", "scheduled", "reaction", "retry",
                                 "test"]),
              help="Only runs with this trigger (default all).")
@json_option
def timing_cmd(dsn: str, since: str, trigger: str | None, as_json: bool) -> None:
    """Queue wait, first response and total distributions (p50, p90, p99, max): one
    sample per run, its first response for latency and its end for totals."""
    from .tables import render

    rows = _query(dsn, "select * from runlane.timing_summary(p_since => %s::interval, "
                       "p_trigger => %s::text)", (since, trigger))
    if as_json:
        _emit_json({"since": since, "trigger": trigger, "measures": rows})
        return
    click.echo(render(f"Timing over the last {since}" + (f", trigger {trigger}" if trigger
                                                          else "") + " (ms)",
                      ["measure", "samples", "p50", "p90", "p99", "max"],
                      [[r["measure"], r["samples"], r["p50_ms"], r["p90_ms"], r["p99_ms"],
                        r["max_ms"]] for r in rows]))


@main.command("journal")
@dsn_option
@click.argument("agent_id")
@click.option("--limit", type=int, default=50, show_default=True)
@json_option
def journal_cmd(dsn: str, agent_id: str, limit: int, as_json: bool) -> None:
    """AGENT's runs, skips and their reasons, newest first."""
    from .tables import render

    rows = _query(dsn, "select * from runlane.agent_journal(p_agent_id => %s::text, "
                       "p_limit => %s::int)", (agent_id, limit))
    if as_json:
        _emit_json({"agent_id": agent_id, "runs": rows})
        return
    click.echo(render(f"Journal of {agent_id} (newest first)",
                      ["run", "created", "lane", "trigger", "state", "reason", "attempts",
                       "occurrence", "coalesced", "first response ms", "total ms"],
                      [[r["run_id"], r["created_at"], r["lane"], r["trigger"], r["state"],
                        r["reason"], r["attempts"], r["occurrence"], r["coalesced"],
                        r["first_response_ms"], r["total_ms"]] for r in rows]))


@main.command("embedded")
@click.option("--data-dir", default=".runlane/embedded", show_default=True,
              help="Where the embedded PostgreSQL keeps its data ('' for a throwaway one).")
@click.option("--agent", "agent_spec", default="runlane.agents.echo:agent", show_default=True,
              help="The agent, as module:attr.")
@click.option("--scan-interval", type=float, default=1.0, show_default=True,
              help="Seconds between recovery scans (runs committed by other processes are "
                   "found by the scan: embedded mode does not LISTEN).")
def embedded_cmd(data_dir: str, agent_spec: str, scan_interval: float) -> None:
    """One process: an embedded PostgreSQL, migrated, and a worker for both lanes with
    in-process notifications; logs its DSN (embedded.started) and runs until SIGTERM."""
    from .agents import load_agent
    from .embedded import serve_embedded

    log.configure()
    try:
        agent = load_agent(agent_spec)
    except (ImportError, AttributeError, TypeError) as exc:
        click.echo(f"error: cannot load agent {agent_spec}: {exc}", err=True)
        sys.exit(1)
    try:
        eventloop.run(serve_embedded(agent, data_dir or None, scan_interval=scan_interval))
    except (psycopg.Error, RuntimeError) as exc:
        fail(exc)


@main.command("follow")
@dsn_option
@click.argument("run_id", type=int)
@click.option("--after", type=int, default=0, show_default=True,
              help="Start after this output id (the last one you saw).")
def follow_cmd(dsn: str, run_id: int, after: int) -> None:
    """Print RUN_ID's visible output as it arrives, until the run is finished."""
    from contextlib import aclosing

    from .stream import stream

    async def follow() -> None:
        async with aclosing(stream(dsn, run_id, after=after)) as outputs:
            async for output in outputs:
                click.echo(output["body"], nl=False)
                sys.stdout.flush()
        click.echo()

    try:
        asyncio.run(follow())
    except psycopg.Error as exc:
        fail(exc, API, dsn, also=WORKER)
    except KeyboardInterrupt:
        sys.exit(130)
