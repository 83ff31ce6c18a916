"""Embedded mode: one process with its own PostgreSQL, a migrated schema and a worker.

This is the seed's "memory job driver": nothing to install or run beside the process.
It starts a private PostgreSQL cluster from the machine's server binaries
(`runlane.pgcluster.LocalCluster`: loopback only, trust auth, run as an unprivileged OS
user when we are root), migrates it, and runs a `Worker` whose notifications are
in-process: there is no LISTEN connection; the helpers below commit, publish and then
call `Worker.notify(lane)`, the maintenance leader wakes the background lane after a
tick fired a run, and a run that ends wakes the lanes. The recovery scan and the
maintenance passes are exactly those of `runlane worker`, so a run committed by another
process (or whose wake-up was lost) is still started, by the scan.

Why the system's binaries rather than a pip-installed server (`pgserver`): the demo
machines have PostgreSQL 15 from the distribution (the test suite needs it for pgTAP
anyway), so nothing more is downloaded; `LocalCluster` already handles running as
root, which PostgreSQL itself refuses and `pgserver` does not arrange for us; and the
server is the same major version, built with the same extensions, as in tests and
production. Set RUNLANE_PG_BINDIR to use other binaries.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import re
import socket
import subprocess
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from . import log
from .agents import Agent
from .maintenance import Maintenance
from .migrate import migrate
from .pgcluster import LocalCluster
from .rows import one
from .worker import Worker, WorkerConfig

SUBMIT = """
select message_id, run_id, disposition from runlane.submit_message(
    p_agent_id => %(agent_id)s::text, p_thread_id => %(thread_id)s::text,
    p_body => %(body)s::text)
"""
RUN_NOW = """
select run_id, state, reason, lane from runlane.run_now(p_agent_id => %(agent_id)s::text)
"""
PUBLISH = "select runlane.publish_run(p_run_id => %(run_id)s::bigint)"
CANCEL = "select runlane.cancel_run(p_run_id => %(run_id)s::bigint) as state"
TICK_AT = """
select event, agent_id, run_id, occurrence
from runlane.tick(p_now => %(now)s::timestamptz)
"""

DEFAULT_DATA_DIR = Path(".runlane") / "embedded"


class _InProcessMaintenance(Maintenance):
    """The worker's maintenance, publishing the runs a tick fired in-process as well:
    nobody LISTENs here, so the pg_notify of publish_run is harmlessly unheard."""

    def __init__(self, worker: Worker, *args: Any):
        super().__init__(*args)
        self._worker = worker

    async def publish(self, conn: psycopg.AsyncConnection, run_id: int) -> None:
        await super().publish(conn, run_id)
        self._worker.notify("background")


def _pin_port(datadir: Path, port: int) -> None:
    """A reused data directory keeps the port of its first start: point it at today's."""
    conf = datadir / "postgresql.auto.conf"
    if not conf.exists():
        return
    lines = [line for line in conf.read_text().splitlines() if not re.match(r"\s*port\s*=", line)]
    conf.write_text("\n".join([*lines, f"port = {port}"]) + "\n")


def _check_port_free(port: int) -> None:
    """RuntimeError naming the port when something on 127.0.0.1 already listens there."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise RuntimeError(
                f"port {port} on 127.0.0.1 is taken by another program: choose another "
                "--port, or leave it out for a free one"
            ) from None


class Embedded:
    """`async with Embedded(agent) as rl:` — a database and a worker in this process.

    `data_dir=None` uses a throwaway directory removed on exit; a path keeps the data
    between runs (`runlane embedded` uses `.runlane/embedded`). `port=None` listens on a
    free port of 127.0.0.1; a given port that is taken is a RuntimeError."""

    def __init__(
        self,
        agent: Agent,
        data_dir: Path | str | None = None,
        lanes: tuple[str, ...] = ("interactive", "background"),
        autostart: bool = True,
        port: int | None = None,
        **worker_options: Any,
    ):
        self.agent = agent
        self.port = port
        self.data_dir = Path(data_dir).resolve() if data_dir is not None else None
        self.lanes = list(lanes)
        self.autostart = autostart
        self.worker_options = worker_options
        self.cluster: LocalCluster | None = None
        self.worker: Worker | None = None
        self._task: asyncio.Task | None = None
        self._conn: psycopg.AsyncConnection | None = None

    @property
    def dsn(self) -> str:
        if self.cluster is None:
            raise RuntimeError("the embedded database is not started")
        return self.cluster.dsn

    @property
    def _api(self) -> psycopg.AsyncConnection:
        """The API connection (autocommit), open from start() to stop()."""
        if self._conn is None:
            raise RuntimeError("the embedded database is not started")
        return self._conn

    # -- lifecycle ---------------------------------------------------------------------
    def start_database(self) -> str:
        """Start (initializing on first use) and migrate the database; returns its DSN."""
        if self.port is not None:
            _check_port_free(self.port)
        self.cluster = LocalCluster(self.data_dir, port=self.port)
        if self.data_dir is not None:
            _pin_port(self.data_dir, self.cluster.port)
        try:
            self.cluster.start()
        except subprocess.CalledProcessError as exc:  # initdb: say why, in one message
            raise RuntimeError(
                f"cannot initialize {self.cluster.datadir} (as OS user "
                f"{self.cluster.os_user or 'self'}): {(exc.stderr or '').strip()}"
            ) from None
        with psycopg.connect(self.cluster.dsn) as conn:
            migrate(conn)
        return self.cluster.dsn

    def stop_database(self) -> None:
        if self.cluster is None:
            return
        if self.data_dir is None:
            self.cluster.destroy()
        else:
            self.cluster.stop()
        self.cluster = None

    async def start(self) -> None:
        """The database, then (unless autostart is off) the worker."""
        await asyncio.to_thread(self.start_database)
        self._conn = await psycopg.AsyncConnection.connect(
            self.dsn, autocommit=True, application_name="runlane-embedded"
        )
        log.get().info(
            "embedded.started",
            **{"embedded.dsn": self.dsn, "embedded.persistent": self.data_dir is not None},
        )
        if self.autostart:
            self.start_worker()

    def start_worker(self) -> None:
        """The worker, with in-process notifications; its startup pass scans both lanes."""
        config = WorkerConfig(
            dsn=self.dsn, lanes=self.lanes, agent=self.agent, listen=False, **self.worker_options
        )
        self.worker = Worker(config)
        if config.maintenance is not None:
            self.worker.maintenance = _InProcessMaintenance(
                self.worker, config.dsn, config.maintenance, config.application_name
            )
        self._task = asyncio.create_task(self.worker.run(), name="embedded-worker")

    async def stop(self) -> None:
        if self.worker is not None and self._task is not None:
            self.worker.request_stop()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None:
            await self._conn.close()
        await asyncio.to_thread(self.stop_database)

    async def wait(self) -> None:
        """Until the worker stops (SIGTERM/SIGINT)."""
        if self._task is not None:
            await self._task

    async def __aenter__(self) -> Embedded:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    # -- the API, with in-process notification -----------------------------------------
    async def _one(self, sql: str, params: dict[str, Any]) -> dict[str, Any]:
        cur = self._api.cursor(row_factory=dict_row)
        await cur.execute(sql, params)
        return one(await cur.fetchone())

    async def _publish(self, run_id: int, lane: str) -> None:
        """After commit: the database's publication (harmless), then the in-process wake."""
        with contextlib.suppress(psycopg.Error):
            await self._api.execute(PUBLISH, {"run_id": run_id})
        if self.worker is not None:
            self.worker.notify(lane)

    async def submit_message(self, agent_id: str, thread_id: str, body: str) -> dict[str, Any]:
        row = await self._one(SUBMIT, {"agent_id": agent_id, "thread_id": thread_id, "body": body})
        if row["disposition"] == "created":
            await self._publish(row["run_id"], "interactive")
        return row

    async def run_now(self, agent_id: str) -> dict[str, Any]:
        row = await self._one(RUN_NOW, {"agent_id": agent_id})
        if row["state"] == "queued":
            await self._publish(row["run_id"], row["lane"])
        return row

    async def cancel_run(self, run_id: int) -> str:
        """The user's Stop (runlane.cancel_run); a running run's worker is told in-process
        (the database's notification is unheard here; the heartbeat would find it too)."""
        state = (await self._one(CANCEL, {"run_id": run_id}))["state"]
        if state == "running" and self.worker is not None:
            self.worker.stop_hint(run_id)
        return state

    async def tick(self, now: Any) -> list[dict[str, Any]]:
        """One scheduler pass as of `now` (tests and the demo move time this way)."""
        cur = self._api.cursor(row_factory=dict_row)
        await cur.execute(TICK_AT, {"now": now})
        rows = await cur.fetchall()
        for row in rows:
            log.get().info(row["event"], **{"run.id": row["run_id"], "run.trigger": "scheduled"})
            if row["event"] == "routine.fired":
                await self._publish(row["run_id"], "background")
        return rows


async def serve_embedded(
    agent: Agent, data_dir: Path | str | None, port: int | None = None, **worker_options: Any
) -> None:
    """`runlane embedded`: run until SIGTERM/SIGINT, then stop the database."""
    async with Embedded(agent, data_dir, port=port, **worker_options) as embedded:
        await embedded.wait()
