"""The worker registry: this worker's row in runlane.workers, for operators.

Guarantees: the row (worker id, lanes, handlers served) is written at start and refreshed every
REGISTRY_INTERVAL seconds (the contract step treats 2 minutes of silence as gone), and
marked stopped when the worker ends; failing to write it is logged and never stops work.
The refresh also re-asks whether the schema numbers writes until it does.
"""

from __future__ import annotations

import asyncio
import os
import socket

import psycopg

from .. import log
from .config import WorkerConfig
from .db import Database

REGISTER = """
select runlane.register_worker(p_worker_id => %(worker)s::text, p_lanes => %(lanes)s::text[],
                               p_stopped => %(stopped)s::boolean,
                               p_handlers => %(handlers)s::text[],
                               p_host => %(host)s::text, p_pid => %(pid)s::int)
"""
# the machine's name as the operator knows it, cut to what an id may hold
HOST = socket.gethostname()[:256] or None
REGISTRY_INTERVAL = 30.0  # seconds; the contract step treats 2 minutes of silence as gone


class Registry:
    """Keeps this worker's registry row (see the module's docstring)."""

    def __init__(self, config: WorkerConfig, database: Database):
        self.config = config
        self.db = database

    async def register(self, stopped: bool = False) -> None:
        """The worker registry is for operators: failing to write it never stops work."""
        lane = self.config.lanes[0]
        try:
            await self.db.call(
                lane,
                REGISTER,
                {
                    "worker": self.config.worker_id,
                    "lanes": self.config.lanes,
                    "stopped": stopped,
                    "handlers": self.config.handlers,
                    "host": HOST,
                    "pid": os.getpid(),
                },
                fetch="none",
            )
        except psycopg.Error as exc:
            log.get().warning("worker.register_failed", **log.error_fields(exc))

    async def run_forever(self, stopped: asyncio.Event) -> None:
        """Registers now and every REGISTRY_INTERVAL seconds until `stopped` is set;
        until the schema numbers writes, asks again each time (a rolling upgrade may
        apply migration 0004 while this worker runs)."""
        while not stopped.is_set():
            await self.register()
            if not self.db.write_seqs:
                await self.db.check_write_seqs()
            await asyncio.sleep(REGISTRY_INTERVAL)
