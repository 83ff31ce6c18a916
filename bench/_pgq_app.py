"""PgQueuer's side of bench/durable_compare.py: a factory for its own CLI worker
(`pgq run bench._pgq_app:create_pgqueuer`), asyncpg driver, documented defaults, and
one no-op entrypoint. With PGQ_BENCH_STARTS set to a file path, the handler appends
"payload time.time()" to it first (the wake-latency measurement); unset, it does nothing.
The DSN comes from PGQ_BENCH_DSN.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job

_STARTS = os.environ.get("PGQ_BENCH_STARTS", "")


@asynccontextmanager
async def create_pgqueuer() -> AsyncIterator[PgQueuer]:
    connection = await asyncpg.connect(os.environ["PGQ_BENCH_DSN"])
    pgq = PgQueuer(AsyncpgDriver(connection))

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        if _STARTS:
            started = time.time()
            with open(_STARTS, "a") as f:
                f.write(f"{(job.payload or b'').decode()} {started}\n")

    try:
        yield pgq
    finally:
        await connection.close()


if __name__ == "__main__":
    # What `pgq run bench._pgq_app:create_pgqueuer` does, through pgqueuer.run (the CLI of
    # pgqueuer 1.6.0 fails at start in setup_fancy_logger: its log level arrives as a str).
    import asyncio

    import pgqueuer

    asyncio.run(pgqueuer.run(create_pgqueuer))
