"""Where an idle worker's wake-up goes: publish -> notification -> claim -> first step.

One throwaway cluster with durable_compare's durable settings, one runlane Worker run
in this process (its real listener, dispatcher, claim and supervisor) with a no-op agent,
and a publisher in its own process sending one chat message every --gap seconds
(submit_message commit, publish_run commit, then it reads time.time()). Four marks
are taken in the worker, on this machine's clock, by wrapping two of its methods (not by
changing them): the notification handed to the listener, the claim sent, its reply read,
the agent's first step. Printed: the median and p99 of each hop and of the whole, and,
from pg_stat_statements, the statement time of the worker's claim per call (warm
figures are in durable_compare's profile; these are an idle worker's, caches cold
between messages).

    python -m bench wake_hops [--quick] [--idle N] [--gap S]

A diagnostic for issue 15's latency goal, never a test: it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

import psycopg

from bench import _common
from bench import durable_compare as dc
from runlane.agents import RunContext, StepResult, done
from runlane.pgcluster import LocalCluster
from runlane.worker import Worker, WorkerConfig
from runlane.worker import dispatcher as dispatcher_module
from runlane.worker import listener as listener_module

PUBLISHER = r"""
import sys, time, uuid, psycopg
conn = psycopg.connect(sys.argv[1], autocommit=True)
for i in range(int(sys.argv[2])):
    run_id = conn.execute("select run_id from runlane.submit_message('agent1', %s, 'hop')",
                          (uuid.uuid4().hex,)).fetchone()[0]
    conn.execute("select runlane.publish_run(%s)", (run_id,))
    print(time.time(), flush=True)
    time.sleep(float(sys.argv[3]))
"""

HOPS = (("publish -> notification", "published", "notified"),
        ("notification -> claim sent", "notified", "sent"),
        ("claim sent -> reply read", "sent", "replied"),
        ("reply read -> first step", "replied", "stepped"),
        ("publish -> first step", "published", "stepped"))


class Marks:
    """Wraps the listener's and the dispatcher's methods to take the four marks; as the
    worker's agent (an object with `step`), it takes the last and finishes the run."""

    def __init__(self):
        self.at: dict[str, list[float]] = {k: [] for k in ("notified", "sent", "replied",
                                                            "stepped")}

    def install(self) -> None:
        marks = self.at
        on_notify = listener_module.Listener._on_notify
        claim = dispatcher_module.LaneDispatcher.claim

        def marked_notify(listener, payload):
            marks["notified"].append(time.time())
            return on_notify(listener, payload)

        async def marked_claim(dispatcher, limit):
            sent = time.time()
            rows = await claim(dispatcher, limit)
            if rows:  # the scan's empty claims are not part of a wake-up
                marks["sent"].append(sent)
                marks["replied"].append(time.time())
            return rows

        listener_module.Listener._on_notify = marked_notify
        dispatcher_module.LaneDispatcher.claim = marked_claim

    async def step(self, ctx: RunContext) -> StepResult:
        self.at["stepped"].append(time.time())
        return done()


async def measure(dsn: str, idle: int, warmup: int, gap: float) -> dict:
    marks = Marks()
    marks.install()
    worker = Worker(WorkerConfig(dsn=dsn, lanes=["interactive"],
                                 agent=marks, maintenance=None))
    task = asyncio.create_task(worker.run())
    await asyncio.sleep(2)  # started, listening, its first (empty) pass made
    publisher = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PUBLISHER, dsn, str(warmup + idle), str(gap),
        stdout=asyncio.subprocess.PIPE)
    out, _ = await publisher.communicate()
    await asyncio.sleep(0.5)
    worker.request_stop()
    await task
    at = {"published": [float(x) for x in out.split()], **marks.at}
    n = min(len(v) for v in at.values())
    if n < warmup + idle:
        counts = {k: len(v) for k, v in at.items()}
        raise RuntimeError(f"only {n} of {warmup + idle} wake-ups were marked: {counts}")
    hops = {}
    for name, start, end in HOPS:
        ms = sorted((at[end][i] - at[start][i]) * 1000 for i in range(warmup, n))
        hops[name] = {"p50_ms": round(statistics.median(ms), 3),
                      "p99_ms": round(_common.percentile(ms, 0.99), 3)}
    return hops


def parse(argv):
    ap = argparse.ArgumentParser(prog="python -m bench wake_hops", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="100 wake-ups")
    ap.add_argument("--idle", type=int, help="measured wake-ups (300; quick 100)")
    ap.add_argument("--warmup", type=int, default=20, help="unmeasured wake-ups first")
    ap.add_argument("--gap", type=float, default=0.02, help="seconds between messages")
    args = ap.parse_args(argv)
    if args.idle is None:
        args.idle = 100 if args.quick else 300
    return args


def main(argv=None) -> list[str]:
    args = parse(argv)
    started = time.monotonic()
    pg = LocalCluster(settings=dc.CLUSTER_SETTINGS)
    pg.start()
    try:
        dc.runlane_template(pg)
        dsn = pg.dsn_for(dc.TEMPLATE)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("create extension if not exists pg_stat_statements")
            conn.execute("select pg_stat_statements_reset()")
            hops = asyncio.run(measure(dsn, args.idle, args.warmup, args.gap))
            claim_us = conn.execute(
                "select round((total_exec_time / calls * 1000)::numeric, 1) "
                "from pg_stat_statements where query like %s and toplevel "
                "order by calls desc limit 1",
                ("%runlane.claim_runs(%p_claim_key%",)).fetchone()
        info = _common.machine(pg)
    finally:
        pg.destroy()
    lines = [f"idle wake-up hops, one in-process worker, one chat message every "
             f"{args.gap * 1000:.0f} ms, {args.idle} measured, durable commits:"]
    for name, _, _ in HOPS:
        lines.append(f"  {name:<28} p50 {hops[name]['p50_ms']:>7.3f}  "
                     f"p99 {hops[name]['p99_ms']:>7.3f} ms")
    lines.append(f"  the worker's claim statement: {claim_us[0] if claim_us else '?'} us per "
                 f"call (pg_stat_statements, top level)")
    lines.append(f"  ({time.monotonic() - started:.0f} s)")
    for line in lines:
        print(line, flush=True)
    _common.write_result("wake_hops", {"machine": info, "settings": dc.DURABLE_SETTINGS,
                                      "idle": args.idle, "gap_s": args.gap, "hops": hops,
                                      "claim_statement_us": float(claim_us[0]) if claim_us
                                      else None})
    return lines


if __name__ == "__main__":
    main()
