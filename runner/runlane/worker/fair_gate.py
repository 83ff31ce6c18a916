"""Who gets a lane's next database connection: organizations take turns.

Guarantees:
- at most `limit` holders at once (a lane's pool size: a turn's holder does not queue
  behind other statements for a pool connection);
- while holders are at the limit, waiters queue per key (an organization; None for the
  worker's own statements) and a freed turn goes to the next key in rotation, FIFO
  within a key: between two turns of a key with waiters every other key gets at most
  one, however many waiters it has;
- a statement for runs of several organizations (a page's messages, a finish batch)
  waits in the shortest of their queues: it serves each of them, so it waits no longer
  than the least busy of them would;
- a waiter cancelled before its turn leaves no trace; one cancelled right after its turn
  was granted passes the turn on.

Why: memory admission, not a count of live runs, limits what a worker takes, so one
organization's burst can put thousands of runs in flight on a worker at once. Their
writes queue for the lane's few connections; served first come, first served, another
organization's run waits behind all of them (seconds for a 3,000-run burst) before its
first write, although the database claimed it at once. Served in turns, that run's
writes wait for one statement, not for the burst. Nothing is capped: a lone
organization's runs take every turn.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Hashable, Iterable


class FairGate:
    """`limit` turns at once, handed out round robin across keys (module docstring)."""

    def __init__(self, limit: int):
        self.limit = max(1, limit)
        self.held = 0
        # Keys with waiters, in rotation order (a dict keeps insertion order): the front
        # key is served next and goes to the back while it still has waiters.
        self.waiting: dict[Hashable, deque[asyncio.Future]] = {}

    def queued(self) -> int:
        return sum(len(q) for q in self.waiting.values())

    @contextlib.asynccontextmanager
    async def turn(self, keys: Iterable[Hashable] = ()) -> AsyncIterator[None]:
        """Holds one turn for the block (take or wait, then release)."""
        if not self.take():
            await self.wait(keys)
        try:
            yield
        finally:
            self.release()

    def take(self) -> bool:
        """Takes a free turn when nobody waits (no await: the statement path's common
        case costs a comparison); False: wait() for one."""
        if self.held < self.limit and not self.waiting:
            self.held += 1
            return True
        return False

    async def wait(self, keys: Iterable[Hashable] = ()) -> None:
        """Waits for a turn in the shortest queue among `keys` (none: the key None);
        the turn is held when it returns (release() it)."""
        key = min(tuple(keys) or (None,), key=lambda k: len(self.waiting.get(k, ())))
        future = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(key, deque()).append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # granted, then cancelled before it ran: pass the turn on
            else:
                queue = self.waiting.get(key)
                if queue is not None:
                    with contextlib.suppress(ValueError):
                        queue.remove(future)
                    if not queue:
                        del self.waiting[key]
            raise

    def release(self) -> None:
        """The turn goes to the front key's first waiter (the key to the back of the
        rotation), or back to the pool of free turns when nobody waits."""
        while self.waiting:
            key = next(iter(self.waiting))
            queue = self.waiting.pop(key)
            future = queue.popleft()
            if queue:
                self.waiting[key] = queue
            if not future.done():
                future.set_result(None)
                return
        self.held -= 1
