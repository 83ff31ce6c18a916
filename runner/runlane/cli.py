"""The `runlane` command line.

Environment variables, one rule: option `--some-option` of `runlane CMD` can also come
from RUNLANE_<CMD>_<SOME_OPTION> (RUNLANE_WORKER_AGENT, RUNLANE_WORKER_LANE="interactive
background": a repeated option takes its values space-separated), named after the option
and set by _name_envvars below. The options several commands share drop the command:
`--dsn` from RUNLANE_DSN, then DATABASE_URL; RUNLANE_LOG_LEVEL, RUNLANE_LOG_FORMAT,
RUNLANE_LOG_ERRORS. `runlane CMD -h` shows each option's variable. docs/operations.md
("Environment variables") lists them all with the ones the runner reads itself, and
tests/runner/test_cli_env.py keeps the docs and the CLI equal.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from typing import Any

import click
import psycopg

from . import errors, eventloop, log
from .migrate import MigrationError, migrate
from .rows import one

DSN_ENVVARS = ("RUNLANE_DSN", "DATABASE_URL")


def _require_dsn(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str:
    if not value:
        raise click.UsageError(
            "no database given: pass --dsn postgresql://…, or set RUNLANE_DSN or DATABASE_URL"
        )
    return value


dsn_option = click.option(
    "--dsn",
    envvar=list(DSN_ENVVARS),
    callback=_require_dsn,
    help="PostgreSQL connection string (else $RUNLANE_DSN, else $DATABASE_URL).",
)


def log_options(command: Any) -> Any:
    """--log-level, --log-format, --log-errors (shared: RUNLANE_LOG_*)."""
    command = click.option(
        "--log-errors",
        is_flag=True,
        envvar="RUNLANE_LOG_ERRORS",
        help="Also log exception messages (error.message). Off by default because an "
        "agent's exception message can quote user content (a prompt, a reply) and "
        "logs must not carry it; the message is stored with the run either way "
        "(`runlane run ID`, `runlane journal`).",
    )(command)
    command = click.option(
        "--log-format",
        type=click.Choice(log.FORMATS),
        default="json",
        show_default=True,
        envvar="RUNLANE_LOG_FORMAT",
        help="json: one JSON object per line; text: a readable line for development.",
    )(command)
    return click.option(
        "--log-level",
        type=click.Choice(log.LEVELS, case_sensitive=False),
        default="info",
        show_default=True,
        envvar="RUNLANE_LOG_LEVEL",
        help="debug also logs the stack (frames only, no message) of each logged error.",
    )(command)


def version() -> str:
    """The installed distribution's version (one source: the package metadata), or the
    package's __version__ when runlane runs from a source tree without metadata."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("runlane")
    except PackageNotFoundError:
        from . import __version__

        return __version__


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"runlane {version()}")
        ctx.exit()


def _name_envvars(command_name: str, command: click.Command) -> None:
    """RUNLANE_<COMMAND>_<OPTION> for each option that names no variable itself, shown in
    its --help. grant-login's --api/--worker (two flags, one choice) are said on the
    command line only."""
    for param in command.params:
        if not isinstance(param, click.Option):
            continue
        if param.is_flag and not param.is_bool_flag:
            continue
        if param.envvar is None:
            option = max(param.opts, key=len).lstrip("-")
            param.envvar = f"RUNLANE_{command_name}_{option}".upper().replace("-", "_")
        param.show_envvar = True


class _Commands(click.Group):
    """The command group; every command added gets its variables by the one rule."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        super().add_command(cmd, name)
        _name_envvars(name or cmd.name or "", cmd)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the version and exit.",
)
def main() -> None:
    """runlane: durable, Postgres-native dispatch for AI-agent runs.

    Every option can also come from the environment: RUNLANE_<COMMAND>_<OPTION>
    (RUNLANE_WORKER_AGENT, RUNLANE_WORKER_LANE="interactive background"), except the
    shared ones: RUNLANE_DSN (then DATABASE_URL) and RUNLANE_LOG_LEVEL / _FORMAT / _ERRORS.
    """


def handler_agents(specs: tuple[str, ...]) -> dict[str, Any]:
    """--agent values → {handler: agent}: `NAME=module:attr` serves handler NAME,
    `module:attr` handler 'default'. A handler named twice, or a malformed name, is a usage
    error."""
    from .worker.config import HANDLER_NAME

    agents: dict[str, Any] = {}
    for spec in specs:
        name, sep, target = spec.partition("=")
        if not sep:
            name, target = "default", spec
        if not HANDLER_NAME.fullmatch(name):
            raise click.UsageError(
                f"--agent {spec}: the handler name must be 1-64 characters of a-z 0-9 _ . -"
            )
        if name in agents:
            raise click.UsageError(f"--agent names handler {name!r} twice")
        agents[name] = load_agent_or_exit(target)
    return agents


def load_agent_or_exit(spec: str) -> Any:
    """The agent `module:attr`, imported like `python -m` imports: the current folder
    first, then the installed packages. A missing module exits 2 with how to fix it."""
    from .agents import load_agent

    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return load_agent(spec)
    except ModuleNotFoundError as exc:
        wanted = spec.partition(":")[0]
        if exc.name and (wanted == exc.name or wanted.startswith(exc.name + ".")):
            click.echo(
                f"error: cannot load agent {spec}: no module named {exc.name!r} in "
                f"the current folder ({cwd}) or the installed packages; run runlane "
                "from your project's folder, install your package (pip install -e .) "
                "or add its folder to PYTHONPATH",
                err=True,
            )
        else:  # the agent's module exists; something it imports does not
            click.echo(f"error: cannot load agent {spec}: {exc}", err=True)
        sys.exit(2)
    except (ImportError, AttributeError, TypeError) as exc:
        click.echo(f"error: cannot load agent {spec}: {exc}", err=True)
        sys.exit(1)
    except ValueError as exc:  # the agent refuses its configuration (environment)
        click.echo(f"error: cannot load agent {spec}: {exc}", err=True)
        sys.exit(2)


def configure_agents_or_exit(agents: dict[str, Any], options: tuple[str, ...]) -> None:
    """`--agent-option NAME=VALUE`s handed to the configure() of every served agent that
    has one (a worker serving several handlers configures each that takes options). No
    agent with options, or an option one refuses, exits 2 naming the option."""
    if not options:
        return
    pairs = [option.partition("=") for option in options]
    if any(not sep or not name.strip() for name, sep, _ in pairs):
        raise click.BadParameter("give NAME=VALUE", param_hint="--agent-option")
    configurable = {h: a for h, a in agents.items() if getattr(a, "configure", None)}
    if not configurable:
        raise click.BadParameter(
            f"the agents served here take no options ({', '.join(sorted(agents))})",
            param_hint="--agent-option",
        )
    for handler, agent in configurable.items():
        try:
            agent.configure(**{name.strip(): value for name, _, value in pairs})
        except (TypeError, ValueError) as exc:
            raise click.BadParameter(
                f"handler {handler}: {exc}", param_hint="--agent-option"
            ) from None


# The role each command needs; a permission refusal names it (errors.missing_role).
API, WORKER = "runlane_api", "runlane_worker"


def fail(
    exc: BaseException, needs: str | None = None, dsn: str | None = None, also: str | None = None
) -> None:
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
@click.option(
    "--to",
    "to",
    type=int,
    default=None,
    help="Stop after this migration (e.g. --to 2 for a staged upgrade).",
)
@click.option(
    "--lock-timeout",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds to wait for another migrator's lock, and for each migration's "
    "table locks (1 s attempts, retried); then fail naming the holders.",
)
@click.option(
    "--citus",
    is_flag=True,
    help="On a Citus coordinator with worker nodes: also distribute the schema, the "
    "organizations' tables by org_id and the global ones as reference tables (once; "
    "with the workers stopped).",
)
def migrate_cmd(dsn: str, to: int | None, lock_timeout: float, citus: bool) -> None:
    """Apply pending migrations, then re-apply the functions."""
    if citus and to is not None:
        raise click.UsageError("--citus distributes the whole schema: it takes no --to")
    try:
        with psycopg.connect(dsn) as conn:
            if citus:
                from .citus import migrate_citus

                applied = migrate_citus(conn, lock_timeout=lock_timeout)
            else:
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
@click.option(
    "--lane",
    "lanes",
    multiple=True,
    required=True,
    type=click.Choice(["interactive", "background"]),
    help="Lane to serve; repeat for both (each lane has its own dispatcher).",
)
@click.option(
    "--agent",
    "agent_spec",
    multiple=True,
    help="The agent, as module:attr (imported from the current folder or the "
    "installed packages), for the agents of handler 'default'; NAME=module:attr serves "
    "handler NAME (put_agent's key handler). Repeat to serve several handlers: the worker "
    "claims only their runs. Required: runlane.agents.echo:agent echoes "
    "messages back, a stand-in for trying runlane.",
)
@click.option(
    "--agent-option",
    "agent_options",
    multiple=True,
    metavar="NAME=VALUE",
    help="An option for the agent, passed to its configure(NAME=VALUE); repeatable. "
    "runlane.agents.openai takes its RUNLANE_OPENAI_* settings by their lower-case "
    "names, e.g. first_token_timeout=30.",
)
@click.option("--worker-id", default="", help="Lease owner name (default host-pid-random).")
@click.option(
    "--shutdown-grace",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds runs may finish after SIGTERM/SIGINT before they are released.",
)
@click.option(
    "--memory-buffer-mb",
    type=int,
    default=64,
    show_default=True,
    help="Free memory (and process headroom) required before each claim.",
)
@click.option(
    "--memory-probe",
    default=None,
    help="module:attr of a probe returning runlane.admission.Memory (tests, ops).",
)
@click.option(
    "--lease",
    type=float,
    default=60.0,
    show_default=True,
    help="Lease seconds; heartbeats every third of it.",
)
@click.option(
    "--scan-interval",
    type=float,
    default=5.0,
    show_default=True,
    help="Seconds between recovery scans of each lane.",
)
@click.option(
    "--fast-scan-interval",
    type=click.FloatRange(min=0.01),
    default=0.1,
    show_default=True,
    help="Seconds between scans of each lane while notifications cannot be "
    "counted on: the NOTIFY queue is at least --notify-queue-warn full (from "
    "0.5 runlane sends none), or --scan-only.",
)
@click.option(
    "--scan-only",
    is_flag=True,
    help="Run without LISTEN: no LISTEN check at startup (a worker whose LISTEN "
    "cannot be proven refuses to start without this), every lane scans every "
    "--fast-scan-interval, a Stop is seen at the run's next heartbeat, and "
    "connections prepare no statements. For where LISTEN cannot work, e.g. "
    "a transaction-pooled PgBouncer; logged as worker.scan_only (a warning) "
    "and shown as runlane_dispatch_scan_only.",
)
@click.option(
    "--claim-batch", type=int, default=10, show_default=True, help="Runs per claim_runs() call."
)
@click.option(
    "--pool-size",
    type=int,
    default=10,
    show_default=True,
    help="Database connections per lane for run work (not a run cap).",
)
@click.option(
    "--output-window",
    type=click.FloatRange(0, 10),
    default=0.02,
    show_default=True,
    help="Seconds the outputs agents emit wait to go to the database together: one "
    "commit per lane for all runs' outputs of a window. An attempt's first visible "
    "output goes at once. Longer: fewer commits, later tokens; 0: no wait.",
)
@click.option(
    "--max-per-org",
    type=click.IntRange(0, 1_000_000),
    default=200,
    show_default=True,
    help="At most this many runs of one organization in flight on this worker "
    "while another organization within its bound has runs waiting, so one "
    "organization's burst leaves the others the first places; a lone "
    "organization is limited by memory admission alone (0: no bound).",
)
@click.option(
    "--max-per-org-strict",
    is_flag=True,
    default=False,
    help="The --max-per-org bound binds always, a lone organization included "
    "(for a worker whose limit is not memory). Keep it at least twice the "
    "largest claim page (10 x --claim-batch), or one organization's backlog "
    "is claimed in part pages.",
)
@click.option(
    "--maintenance/--no-maintenance",
    default=True,
    show_default=True,
    help="Take part in the maintenance leader election.",
)
@click.option(
    "--tick-interval",
    type=float,
    default=5.0,
    show_default=True,
    help="Seconds between maintenance passes of the leader (schedules fire, stale "
    "leases are reaped).",
)
@click.option(
    "--queue-delay-interval",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds between the leader's checks for runs a person waits for that are "
    "overdue (run.queue_delayed).",
)
@click.option(
    "--queue-delay-threshold",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds such a run may be due before run.queue_delayed is logged.",
)
@click.option(
    "--leader-retry",
    type=float,
    default=3.0,
    show_default=True,
    help="Seconds between a follower's attempts to become maintenance leader.",
)
@click.option(
    "--leader-ttl",
    type=float,
    default=None,
    help="Seconds the maintenance leader's lease lasts without renewal (1-60, "
    "longer than --tick-interval; default 3 x --tick-interval = 15); a "
    "paused leader is replaced within leader-ttl + leader-retry seconds.",
)
@click.option(
    "--notify-queue-warn",
    type=float,
    default=0.25,
    show_default=True,
    help="Log notify.queue_usage (once per maintenance pass, naming the backends "
    "likely holding the queue) and scan every --fast-scan-interval while the "
    "server's NOTIFY queue is at least this full (and from 0.5 whatever "
    "this is: runlane stops notifying there).",
)
@click.option(
    "--retention",
    default=None,
    help="Delete runs finished longer ago than this (e.g. 30d, 240h, P30D; at "
    "least 8 days) with their outputs, messages, charges and journal; the "
    "maintenance leader purges in batches each pass. Off by default.",
)
@click.option(
    "--deliveries",
    type=click.Choice(["direct", "legacy"]),
    default="direct",
    show_default=True,
    help="legacy: take run deliveries from run_jobs with the older generation's "
    "statements (rolling upgrades); direct: claim runs (the default).",
)
@click.option(
    "--metrics-port",
    type=int,
    default=None,
    help="Serve Prometheus metrics on this port at /metrics (needs prometheus_client).",
)
@click.option(
    "--metrics-addr",
    default="127.0.0.1",
    show_default=True,
    help="Address the metrics endpoint binds to.",
)
@log_options
def worker_cmd(
    dsn: str,
    lanes: tuple[str, ...],
    agent_spec: tuple[str, ...],
    agent_options: tuple[str, ...],
    worker_id: str,
    shutdown_grace: float,
    memory_buffer_mb: int,
    memory_probe: str | None,
    lease: float,
    scan_interval: float,
    fast_scan_interval: float,
    scan_only: bool,
    claim_batch: int,
    pool_size: int,
    output_window: float,
    max_per_org: int,
    max_per_org_strict: bool,
    maintenance: bool,
    tick_interval: float,
    queue_delay_interval: float,
    queue_delay_threshold: float,
    leader_retry: float,
    leader_ttl: float | None,
    notify_queue_warn: float,
    retention: str | None,
    deliveries: str,
    metrics_port: int | None,
    metrics_addr: str,
    log_level: str,
    log_format: str,
    log_errors: bool,
) -> None:
    """Listen, claim and execute runs of AGENT (--agent) until SIGTERM/SIGINT."""
    from .maintenance import MaintenanceConfig
    from .retention import parse_window
    from .worker import WorkerConfig, serve

    log.configure(log_level, fmt=log_format, log_errors=log_errors)
    if deliveries == "legacy":  # the older generation's statements: no agent runs
        _legacy_worker(dsn, worker_id, memory_probe, memory_buffer_mb)
        return
    try:
        window = parse_window(retention) if retention is not None else None
        maintenance_config = MaintenanceConfig(
            tick_interval,
            queue_delay_interval,
            queue_delay_threshold,
            leader_retry,
            leader_ttl=leader_ttl,
            notify_queue_warn=notify_queue_warn,
            retention=window,
        )
    except ValueError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if not agent_spec:  # never a silent stand-in: a worker runs the agent it is given
        raise click.UsageError(
            "runlane worker needs an agent: --agent mypkg.agents:researcher (or "
            "RUNLANE_WORKER_AGENT=mypkg.agents:researcher); to try runlane without one, "
            "--agent runlane.agents.echo:agent echoes each message back"
        )
    agents = handler_agents(agent_spec)
    configure_agents_or_exit(agents, agent_options)
    config = WorkerConfig(
        dsn=dsn,
        lanes=list(dict.fromkeys(lanes)),
        agent=agents.get("default"),
        agents=agents,
        worker_id=worker_id,
        shutdown_grace=shutdown_grace,
        memory_buffer_mb=memory_buffer_mb,
        memory_probe=memory_probe,
        lease=lease,
        scan_interval=scan_interval,
        fast_scan_interval=fast_scan_interval,
        fast_scan_from=notify_queue_warn,
        scan_only=scan_only,
        claim_batch=claim_batch,
        pool_size=pool_size,
        output_window=output_window,
        max_per_org=max_per_org,
        max_per_org_strict=max_per_org_strict,
        maintenance=maintenance_config if maintenance else None,
    )
    if metrics_port is not None:
        from .metrics import Metrics

        config.metrics = Metrics(dsn)
        config.metrics.serve(metrics_port, metrics_addr)
        log.get().info("metrics.serving", **{"metrics.port": metrics_port})
    from .worker.db import DistributedSchema
    from .worker.listen_probe import ListenUnavailable

    # What was built so far (modules, the agent, the configuration) lives as long as the
    # process: out of the collector's sight, so its full collections stop walking it.
    gc.freeze()
    try:
        eventloop.run(serve(config))
    # (a transaction-pooled PgBouncer, a schema Citus distributed: never silent)
    except (ListenUnavailable, DistributedSchema) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


@main.command("grant-login")
@dsn_option
@click.argument("login")
@click.option("--api", "role", flag_value="api", help="Give LOGIN runlane_api (applications).")
@click.option(
    "--worker",
    "role",
    flag_value="worker",
    help="Give LOGIN runlane_worker (workers; they act on every organization).",
)
@click.option(
    "--org",
    default=None,
    help="With --api: LOGIN acts for this organization only. Without it, --api "
    "marks LOGIN as acting for every organization, on purpose.",
)
def grant_login_cmd(dsn: str, login: str, role: str | None, org: str | None) -> None:
    """Give an existing login the runlane_api or runlane_worker role (run it as the
    schema owner or a superuser). `--api` also enters the login in this database
    (runlane.scope_api_login): with `--org X` for organization X only, without it for every
    organization; an API login with no entry in a database is refused there."""
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
                scoped = conn.execute(
                    "select org_id from runlane.api_logins where org_id is not null"
                    " and role_oid = to_regrole(quote_ident(%s))",
                    (login,),
                ).fetchone()
                if scoped is not None:
                    raise RuntimeError(
                        f"login {login} is limited to organization {scoped[0]}; a worker acts "
                        "on every organization: use another login for workers"
                    )
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
@log_options
def tick_cmd(dsn: str, log_level: str, log_format: str, log_errors: bool) -> None:
    """One maintenance pass (tick and publish, reap_stale, redundant timer runs,
    queue delay), for cron or pg_cron; does nothing while a worker leads maintenance."""
    from .maintenance import one_pass

    log.configure(log_level, fmt=log_format, log_errors=log_errors)
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
        click.echo(
            f"warning: run {run_id} committed but not published "
            f"({exc.sqlstate}); a worker's scan will start it",
            err=True,
        )


@main.command("run-now")
@dsn_option
@click.argument("agent_id")
def run_now_cmd(dsn: str, agent_id: str) -> None:
    """Start AGENT's background run now (manual "Run now")."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            run_id, state, reason = one(
                conn.execute(
                    "select run_id, state, reason from runlane.run_now(p_agent_id => %s::text)",
                    (agent_id,),
                ).fetchone()
            )
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
@click.option(
    "--idempotency-key",
    default=None,
    help="Retry-safe: a later submit with this key (same agent, thread and text) returns "
    "the first one's answer and creates nothing.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the returned row as JSON.")
def submit_cmd(
    dsn: str, agent_id: str, thread_id: str, text: str, idempotency_key: str | None, as_json: bool
) -> None:
    """Send TEXT to AGENT in THREAD (a chat message)."""
    try:
        # send_message: the message and its run's notification in one commit.
        with psycopg.connect(dsn, autocommit=True) as conn:
            message_id, run_id, disposition = one(
                conn.execute(
                    "select message_id, run_id, disposition from runlane.send_message("
                    "p_agent_id => %s::text, p_thread_id => %s::text, p_body => %s::text, "
                    "p_idempotency_key => %s::text)",
                    (agent_id, thread_id, text, idempotency_key),
                ).fetchone()
            )
    except psycopg.Error as exc:
        fail(exc, API, dsn)
    if as_json:
        _emit_json({"message_id": message_id, "run_id": run_id, "disposition": disposition})
        return
    click.echo(
        f"message {message_id} {disposition}" + (f" run {run_id}" if run_id is not None else "")
    )


def _legacy_worker(
    dsn: str, worker_id: str, memory_probe: str | None, memory_buffer_mb: int
) -> None:
    """The older generation's delivery loop, with memory admission and SIGTERM drain."""
    import os

    from .admission import Admission, load_probe
    from .legacy import run_legacy_worker, stop_on_signals

    stop = stop_on_signals()
    admission = Admission(load_probe(memory_probe), memory_buffer_mb * 1024 * 1024)
    sys.exit(
        run_legacy_worker(dsn, worker_id or f"legacy-{os.getpid()}", admission=admission, stop=stop)
    )


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
def _query(dsn: str, sql: str, params: tuple = (), also: str | None = WORKER) -> list[dict]:
    """The rows of one ops view; the views are runlane_api's (and runlane_worker's, but
    for what shows a run's error or text: `also=None`)."""
    from psycopg.rows import dict_row

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            return conn.cursor(row_factory=dict_row).execute(sql, params).fetchall()
    except psycopg.Error as exc:
        fail(exc, API, dsn, also=also)
    raise AssertionError("unreachable")


def _emit_json(data: object) -> None:
    import json

    click.echo(
        json.dumps(
            data, default=lambda v: v.isoformat() if hasattr(v, "isoformat") else str(v), indent=2
        )
    )


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


@main.command("status")
@dsn_option
@json_option
def status_cmd(dsn: str, as_json: bool) -> None:
    """Lanes (queued, due, running, oldest wait), handlers with queued runs that no live
    worker serves, organizations' background capacity, and agents with their next run in
    their own timezone."""
    from .tables import render

    data = {
        "lanes": _query(dsn, "select * from runlane.lane_status()"),
        "unserved_handlers": _query(dsn, "select * from runlane.unserved_handlers()"),
        "organizations": _query(dsn, "select * from runlane.org_status()"),
        "agents": _query(dsn, "select * from runlane.agent_schedules()"),
    }
    if as_json:
        _emit_json(data)
        return
    click.echo(
        render(
            "Lanes",
            ["lane", "queued", "due (waiting)", "running", "oldest wait ms"],
            [
                [r["lane"], r["queued"], r["due"], r["running"], r["oldest_due_wait_ms"]]
                for r in data["lanes"]
            ],
        )
    )
    for r in data["unserved_handlers"]:
        click.echo(
            f"handler {r['handler']}: {r['queued']} queued {r['lane']} runs, "
            "no worker serves it (runlane worker --agent "
            f"{r['handler']}=module:attr)"
        )
    click.echo()
    click.echo(
        render(
            "Organizations (background lane)",
            ["organization", "running", "queued", "agent_max_concurrency"],
            [
                [
                    r["org_id"],
                    r["running_background"],
                    r["queued_background"],
                    r["agent_max_concurrency"],
                ]
                for r in data["organizations"]
            ],
        )
    )
    click.echo()
    click.echo(
        render(
            "Agents",
            [
                "agent",
                "organization",
                "schedule",
                "timezone",
                "status",
                "next run (local)",
                "next run (UTC)",
            ],
            [
                [
                    r["agent_id"],
                    r["org_id"],
                    r["schedule"] or "-",
                    r["timezone"],
                    r["status"],
                    r["next_run_local"],
                    r["next_run_at"],
                ]
                for r in data["agents"]
            ],
        )
    )


SINCE_FORMS = "30s, 5m, 2h, 1d, 1w, '2 days', '1h30m' or P1D (a PostgreSQL interval)"


@main.command("timing")
@dsn_option
@click.option(
    "--since",
    default="1h",
    show_default=True,
    help=f"Window back from now: {SINCE_FORMS}.",
)
@click.option(
    "--trigger",
    default=None,
    type=click.Choice(["interactive", "manual", "scheduled", "reaction", "retry", "test"]),
    help="Only runs with this trigger (default all).",
)
@json_option
def timing_cmd(dsn: str, since: str, trigger: str | None, as_json: bool) -> None:
    """Queue wait, first response and total distributions (p50, p90, p99, max): one
    sample per run, its first response for latency and its end for totals."""
    from psycopg.rows import dict_row

    from .tables import render

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = (
                conn.cursor(row_factory=dict_row)
                .execute(
                    "select * from runlane.timing_summary("
                    "p_since => %s::interval, p_trigger => %s::text)",
                    (since, trigger),
                )
                .fetchall()
            )
    except psycopg.Error as exc:
        # 22007/22015: not an interval; 22023: not a positive one (timing_summary).
        if exc.sqlstate in ("22007", "22015", "22023"):
            click.echo(
                f"error: --since {since!r} is not a positive duration: use {SINCE_FORMS}",
                err=True,
            )
            sys.exit(2)
        fail(exc, API, dsn, also=WORKER)
    if as_json:
        _emit_json({"since": since, "trigger": trigger, "measures": rows})
        return
    click.echo(
        render(
            f"Timing over the last {since}" + (f", trigger {trigger}" if trigger else "") + " (ms)",
            ["measure", "samples", "p50", "p90", "p99", "max"],
            [
                [r["measure"], r["samples"], r["p50_ms"], r["p90_ms"], r["p99_ms"], r["max_ms"]]
                for r in rows
            ],
        )
    )


@main.command("journal")
@dsn_option
@click.argument("agent_id")
@click.option("--limit", type=int, default=50, show_default=True)
@json_option
def journal_cmd(dsn: str, agent_id: str, limit: int, as_json: bool) -> None:
    """AGENT's runs, skips and their reasons, newest first, with each run's last error
    (`runlane run ID` shows one run in full)."""
    from .tables import render

    rows = _query(
        dsn,
        "select j.*, d.error_class, d.error "
        "from runlane.agent_journal(p_agent_id => %s::text, "
        "p_limit => %s::int) as j "
        "cross join lateral runlane.run_detail(j.run_id) as d "
        "order by j.created_at desc, j.run_id desc",
        (agent_id, limit),
        also=None,
    )  # the errors can quote user content: runlane_api only
    if as_json:
        _emit_json({"agent_id": agent_id, "runs": rows})
        return
    click.echo(
        render(
            f"Journal of {agent_id} (newest first)",
            [
                "run",
                "created",
                "lane",
                "trigger",
                "state",
                "reason",
                "attempts",
                "occurrence",
                "coalesced",
                "first response ms",
                "total ms",
                "error",
            ],
            [
                [
                    r["run_id"],
                    r["created_at"],
                    r["lane"],
                    r["trigger"],
                    r["state"],
                    r["reason"],
                    r["attempts"],
                    r["occurrence"],
                    r["coalesced"],
                    r["first_response_ms"],
                    r["total_ms"],
                    _short_error(r),
                ]
                for r in rows
            ],
        )
    )


def _error_text(row: dict) -> str | None:
    if row["error"] is None:
        return None
    return f"{row['error_class']}: {row['error']}" if row["error_class"] else row["error"]


def _short_error(row: dict, width: int = 80) -> str | None:
    text = _error_text(row)
    if text is None:
        return None
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@main.command("run")
@dsn_option
@click.argument("run_id", type=int)
@json_option
def run_cmd(dsn: str, run_id: int, as_json: bool) -> None:
    """One run: its state, reason, attempts, timing, last error (class and message, as
    the failed attempt raised it) and how many outputs it wrote."""
    rows = _query(
        dsn, "select * from runlane.run_detail(p_run_id => %s::bigint)", (run_id,), also=None
    )
    row = rows[0]
    if as_json:
        _emit_json(row)
        return
    fields = [
        ("agent", row["agent_id"]),
        ("organization", row["org_id"]),
        ("lane", row["lane"]),
        ("trigger", row["trigger"]),
        ("state", row["state"]),
        ("reason", row["reason"]),
        ("attempts", f"{row['attempts']} of {row['max_attempts']}"),
        ("created", row["created_at"]),
        ("first started", row["first_started_at"]),
        ("first response", row["first_response_at"]),
        ("finished", row["finished_at"]),
        ("wakes", row["wake_at"]),
        ("queue wait ms", row["queue_wait_ms"]),
        ("first response ms", row["first_response_ms"]),
        ("total ms", row["total_ms"]),
        ("outputs", f"{row['visible_outputs']} visible, {row['outputs']} in all"),
        ("cost", row["cost"]),
        ("error class", row["error_class"]),
        ("error", row["error"]),
    ]
    click.echo(f"run {row['run_id']}")
    for name, value in fields:
        if value is not None:
            click.echo(f"  {name + ':':<19}{value}")


@main.command("embedded")
@click.option(
    "--data-dir",
    default=".runlane/embedded",
    show_default=True,
    help="Where the embedded PostgreSQL keeps its data ('' for a throwaway one).",
)
@click.option(
    "--agent",
    "agent_spec",
    default="runlane.agents.echo:agent",
    show_default=True,
    help="The agent, as module:attr.",
)
@click.option(
    "--scan-interval",
    type=float,
    default=1.0,
    show_default=True,
    help="Seconds between recovery scans (runs committed by other processes are "
    "found by the scan: embedded mode does not LISTEN).",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help="TCP port of the embedded PostgreSQL on 127.0.0.1 (default: a free one); a "
    "taken port is an error.",
)
@log_options
def embedded_cmd(
    data_dir: str,
    agent_spec: str,
    scan_interval: float,
    port: int | None,
    log_level: str,
    log_format: str,
    log_errors: bool,
) -> None:
    """One process: an embedded PostgreSQL, migrated, and a worker for both lanes with
    in-process notifications; logs its DSN (embedded.started) and runs until SIGTERM."""
    from .embedded import serve_embedded

    log.configure(log_level, fmt=log_format, log_errors=log_errors)
    agent = load_agent_or_exit(agent_spec)
    try:
        eventloop.run(
            serve_embedded(agent, data_dir or None, port=port, scan_interval=scan_interval)
        )
    except (psycopg.Error, RuntimeError) as exc:
        fail(exc)


@main.command("follow")
@dsn_option
@click.argument("run_id", type=int)
@click.option(
    "--after",
    type=int,
    default=0,
    show_default=True,
    help="Start after this output id (the last one you saw).",
)
def follow_cmd(dsn: str, run_id: int, after: int) -> None:
    """Print RUN_ID's visible output as it arrives, until the stream has ended (the
    README's end-of-stream rule: the run is finished and its last output was printed).

    When a later attempt started over, a line marks the output above it as superseded:
    "[attempt 1 did not finish; its partial output above is superseded]". The final
    state goes to stderr ("[run 42 succeeded]").

    \b
    Exit codes (the run's outcome):
      0  succeeded          4  canceled           6  unknown run (RL008)
      3  failed             5  skipped            1  any other error
    """
    from contextlib import aclosing

    from .stream import FOLLOW_EXIT, stream

    # stdout carries the run's text only: a log line (a forged notification ignored,
    # hints.py) goes to stderr with the final state.
    log.configure(stream="stderr")

    async def follow() -> str:
        state = "unknown"
        async with aclosing(stream(dsn, run_id, after=after, events=True)) as items:
            async for item in items:
                if item["event"] == "output":
                    click.echo(item["body"], nl=False)
                elif item["event"] == "superseded":
                    gone = item["attempts"]
                    if gone:  # the attempts of the superseded outputs printed above
                        which = ("attempts " if len(gone) > 1 else "attempt ") + ", ".join(
                            str(a) for a in gone
                        )
                        click.echo(
                            f"\n[{which} did not finish; its partial output above is superseded]"
                        )
                    else:  # printed before --after: name the last superseded output
                        click.echo(
                            f"[outputs up to {item['through']} were superseded "
                            "by an attempt that started over]"
                        )
                else:
                    state = item["state"]
                    reason = f" ({item['reason']})" if item["reason"] else ""
                    click.echo()
                    click.echo(f"[run {run_id} {state}{reason}]", err=True)
                sys.stdout.flush()
        return state

    try:
        state = asyncio.run(follow())
    except psycopg.Error as exc:
        if exc.sqlstate == "RL008":
            click.echo(errors.describe(exc), err=True)
            sys.exit(FOLLOW_EXIT["unknown"])
        fail(exc, API, dsn)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(FOLLOW_EXIT[state])


@main.command("dashboard")
@dsn_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; anything but loopback needs --token.",
)
@click.option("--port", type=int, default=8780, show_default=True)
@click.option(
    "--token", default=None, help="Required on every request; open /?token=… once in a browser."
)
@click.option(
    "--allow-actions", is_flag=True, help="Show the Stop button on running runs (calls cancel_run)."
)
@click.option(
    "--show-content", is_flag=True, help="Show output text on run pages (hidden by default)."
)
@click.option(
    "--queue-delay-threshold",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds an interactive run may wait before the overview warns.",
)
@log_options
def dashboard_cmd(
    dsn: str,
    host: str,
    port: int,
    token: str | None,
    allow_actions: bool,
    show_content: bool,
    queue_delay_threshold: float,
    log_level: str,
    log_format: str,
    log_errors: bool,
) -> None:
    """The operator's web page: lanes, organizations, agents and runs, live."""
    from .dashboard import serve

    log.configure(log_level, fmt=log_format, log_errors=log_errors)
    try:
        serve(
            dsn,
            host=host,
            port=port,
            token=token,
            allow_actions=allow_actions,
            show_content=show_content,
            queue_delay_threshold=queue_delay_threshold,
        )
    except ValueError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
