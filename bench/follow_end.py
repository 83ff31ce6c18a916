"""How soon a follower learns that its run ended: finish_run's commit -> stream()'s end.

One throwaway cluster, one agent. Each round: a chat run is claimed (claim_runs) and
writes one output; a `runlane.stream(events=True)` follower (the default 1 s poll, as
`runlane follow` uses) reads that output and waits; then finish_run commits on another
connection and the time from its return to the follower's "end" event is taken on this
machine's clock. Printed: median, p99 and max over --rounds. The finish notifies the
run's stream (runlane._notify_stream_end), so the figure is a notification's round trip
plus one run_status and one outputs_since read, not the poll interval.

    python -m bench follow_end [--quick] [--rounds N] [--poll S]

A diagnostic, never a test: it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from contextlib import aclosing

import psycopg

import runlane
from bench import _common


def parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench follow_end")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--poll", type=float, default=1.0, help="the follower's poll interval")
    parser.add_argument("--quick", action="store_true", help="20 rounds")
    return parser.parse_args(argv)


async def one_round(dsn: str, conn: psycopg.Connection, poll: float) -> float:
    message = conn.execute(
        "select run_id from runlane.submit_message('bench-agent', %s, 'hi')",
        (f"t-{time.monotonic_ns()}",),
    ).fetchone()[0]
    run_id, fence = conn.execute(
        "select run_id, fence from runlane.claim_runs('bench-w', array['interactive'], 1)"
    ).fetchone()
    assert run_id == message
    conn.execute("select runlane.append_output(%s, %s, 'text', 'words')", (run_id, fence))
    seen = asyncio.Event()
    ended: list[float] = []

    async def follow() -> None:
        async with aclosing(runlane.stream(dsn, run_id, poll=poll, events=True)) as items:
            async for item in items:
                if item["event"] == "output":
                    seen.set()
                elif item["event"] == "end":
                    ended.append(time.perf_counter())

    task = asyncio.create_task(follow())
    await seen.wait()
    await asyncio.sleep(0.05)  # the follower is in its wait
    conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run_id, fence))
    finished = time.perf_counter()
    await task
    return (ended[0] - finished) * 1000


def main(argv=None) -> list[str]:
    args = parse(argv)
    rounds = 20 if args.quick else args.rounds
    with _common.cluster() as pg:
        dsn = _common.migrated_database(pg, "bench_follow_end")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("select runlane.put_org('bench-org')")
            conn.execute("select runlane.put_user('bench-owner', 'bench-org')")
            conn.execute(
                "select runlane.put_agent('bench-agent', %s)",
                (json.dumps({"org_id": "bench-org", "owner_id": "bench-owner", "model": "m"}),),
            )

            async def all_rounds() -> list[float]:
                return [await one_round(dsn, conn, args.poll) for _ in range(rounds)]

            took = asyncio.run(all_rounds())
        info = _common.machine(pg)
    figures = {
        "rounds": rounds,
        "poll_s": args.poll,
        "median_ms": round(_common.percentile(took, 0.5), 2),
        "p99_ms": round(_common.percentile(took, 0.99), 2),
        "max_ms": round(max(took), 2),
    }
    _common.write_result("follow_end", {"figures": figures, "machine": info})
    line = (
        f"follow_end: finish -> follower's end over {rounds} rounds (poll {args.poll} s): "
        f"median {figures['median_ms']} ms, p99 {figures['p99_ms']} ms, max {figures['max_ms']} ms"
    )
    print(line)
    return [line]


if __name__ == "__main__":
    main()
