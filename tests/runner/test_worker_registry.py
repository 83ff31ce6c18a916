"""runlane.worker.registry against a real PostgreSQL: the worker's row for operators is
written, refreshed and marked stopped; failing to write it never fails the worker."""

from __future__ import annotations

import asyncio
import os
import socket

from worker_helpers import wait_until
from worker_parts import config

from runlane import log
from runlane.worker.db import Database
from runlane.worker.registry import Registry


def test_a_worker_registers_with_its_lanes_host_and_pid_and_is_marked_stopped_at_the_end(
    db_dsn, conn
):
    def row():
        return conn.execute(
            "select lanes, stopped_at is not null, host, pid from runlane.workers"
            " where worker_id = 'w-reg'"
        ).fetchone()

    async def scenario() -> tuple[tuple, bool]:
        cfg = config(db_dsn, worker_id="w-reg", lanes=["interactive", "background"])
        db = Database(cfg)
        await db.open()
        try:
            registry, stopped = Registry(cfg, db), asyncio.Event()
            task = asyncio.create_task(registry.run_forever(stopped))
            # The refresh loop also finds the schema's numbered writes (asked till found).
            registered = await asyncio.to_thread(
                wait_until, lambda: db.write_seqs and row(), what="the registry row"
            )
            stopped.set()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await registry.register(stopped=True)
            return registered, db.write_seqs
        finally:
            await db.close()

    registered, numbered = asyncio.run(scenario())
    here = (socket.gethostname(), os.getpid())  # what the workers page shows
    assert registered == (["interactive", "background"], False, *here)
    assert numbered is True
    assert row() == (["interactive", "background"], True, *here)


def test_a_refused_registration_is_logged_and_never_raised(db_dsn, conn, capsys):
    log.configure()  # a worker's own set-up: lines to stdout (another test may have moved them)

    async def scenario() -> None:
        cfg = config(db_dsn, worker_id="w-bad", lanes=["no-such-lane"])
        db = Database(cfg)
        await db.open()
        try:
            await Registry(cfg, db).register()
        finally:
            await db.close()

    asyncio.run(scenario())
    assert "worker.register_failed" in capsys.readouterr().out
    assert conn.execute("select count(*) from runlane.workers").fetchone()[0] == 0
