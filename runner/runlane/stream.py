"""Follow a run's visible outputs as they commit: `runlane.stream(dsn, run_id, after=0)`.

    async for output in runlane.stream(dsn, run_id, after=last_seen_id):
        show(output["body"])
        last_seen_id = output["output_id"]      # resume from here after a reconnect

An async iterator of the rows of `runlane.outputs_since` (dicts: output_id, run_id,
attempt, kind, body, created_at), visible kinds only, in output_id order. It LISTENs on
`runlane_outputs` first, then pages with `outputs_since` (so nothing committed before the
LISTEN is missed), then pages again after each notification for this run (its payload
carries the run's stream token from `runlane.stream_token`, never the run id), and every
`poll` seconds anyway (notifications are hints; a finish sends none). Each output is
yielded once (only ids above the last one yielded). The iterator ends when the run is in
a terminal state (`run_timing`'s run.outcome) and everything visible has been yielded: the
state is read BEFORE the last page, and no output can be written once a run is terminal.
A consumer that stops early and calls it again with its last output_id sees neither a gap
nor a repeat, across attempts and resumes of the run: within a run, output ids are taken
and committed in order (each append holds the run's row lock until its commit).

It needs only what `runlane_api` may execute (stream_token, outputs_since, run_timing) and two
connections: one that only listens, so no notification is lost while the other pages.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from psycopg.rows import dict_row

from . import hints

PAGE = """
select o.output_id, o.run_id, o.attempt, o.kind, o.body, o.created_at
from runlane.outputs_since(
    p_run_id => %(run_id)s::bigint, p_after_output_id => %(after)s::bigint,
    p_limit => %(limit)s::int
) as o
"""
OUTCOME = "select runlane.run_timing(p_run_id => %(run_id)s::bigint) ->> 'run.outcome' as outcome"
TOKEN = "select runlane.stream_token(p_run_id => %(run_id)s::bigint) as token"


def _for_stream(payload: str, token: str | None) -> bool:
    """Whether a `runlane_outputs` payload names this run's stream (its token from
    runlane.stream_token). Payloads are untrusted hints (runlane.hints): an unreadable or
    forged one is counted and ignored, never raised (the `poll` interval pages anyway).
    Before migration 0007 there is no token: every hint pages."""
    return token is None or hints.stream_of(payload) == token


async def stream(dsn: str, run_id: int, after: int = 0, *, page_size: int = 500,
                 poll: float = 1.0) -> AsyncIterator[dict[str, Any]]:
    """Yield the run's visible outputs with output_id > `after`, in order, as they commit;
    end once the run is terminal and all of them were yielded (see the module docstring).
    Raises psycopg errors as they are (RL008 for an unknown run)."""
    last = int(after)
    listener = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        reader = await psycopg.AsyncConnection.connect(dsn, autocommit=True,
                                                       row_factory=dict_row)
        try:
            await listener.execute("LISTEN runlane_outputs")
            token = (await (await reader.execute(TOKEN, {"run_id": run_id}))
                     .fetchone())["token"]
            while True:
                outcome = (await (await reader.execute(OUTCOME, {"run_id": run_id}))
                           .fetchone())["outcome"]
                while True:
                    rows = await (await reader.execute(
                        PAGE, {"run_id": run_id, "after": last, "limit": page_size})).fetchall()
                    for row in rows:
                        if row["output_id"] > last:
                            last = row["output_id"]
                            yield row
                    if len(rows) < page_size:
                        break
                if outcome is not None:
                    return
                # Wait for a hint about this run (or the poll interval), then page again.
                async for note in listener.notifies(timeout=poll):
                    if _for_stream(note.payload, token):
                        break
        finally:
            with contextlib.suppress(psycopg.Error):
                await reader.close()
    finally:
        with contextlib.suppress(psycopg.Error):
            await listener.close()
