"""The wake-latency floor: a bare worker on a one-table queue (bench/durable_compare.py).

It LISTENs on channel `floor`; on each notification it claims one row with a single
UPDATE ... FOR UPDATE SKIP LOCKED ... RETURNING (one statement, its own commit), then
starts its handler, which appends "id time.time()" to FILE (claiming again until the
queue is empty, so notifications that arrive together lose no row).

    python -m bench._floor_worker DSN FILE
"""

from __future__ import annotations

import asyncio
import sys
import time

import asyncpg

CLAIM = """
update floor_queue as q
set taken = true
where q.id = (
    select f.id from floor_queue as f
    where not f.taken
    order by f.id
    limit 1
    for update skip locked
)
returning q.id
"""


async def main(dsn: str, path: str) -> None:
    conn = await asyncpg.connect(dsn)
    claim = await conn.prepare(CLAIM)
    woken = asyncio.Event()
    await conn.add_listener("floor", lambda *_: woken.set())
    with open(path, "a", buffering=1) as out:
        while True:
            await woken.wait()
            woken.clear()
            while (row := await claim.fetchrow()) is not None:
                out.write(f"{row['id']} {time.time()}\n")  # the handler starts


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
