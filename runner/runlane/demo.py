"""`runlane demo` (`make demo`): runlane at work in one command, in under a minute.

It starts an embedded PostgreSQL (a throwaway cluster, removed at the end), migrates it
and sets up a small organization: two owners in different timezones (Europe/Berlin and
America/New_York), a chat agent each, two scheduled agents sharing one computer. Then:

  1. before the worker is up: a chat message creates a run and a second one steers it
     while it is still queued; "Run now" on the digest agent queues a manual run and
     pressing it again is a visible `skipped` (already_running); the scheduler, driven
     by a simulated clock (`runlane.tick(p_now)`), fires the triage routine and, at its
     next slot while that run is still pending, coalesces into it;
  2. the embedded worker starts (both lanes, echo agent slowed so progress is
     visible); a message sent while its thread's run is running is `held`; the two
     background runs take turns on their shared computer;
  3. the reply of one chat run (grace's greeting echoed back, read as a chat client
     reads it, with `runlane.outputs_since`), a table of every run with its timing, then
     the distributions (p50/p90) from `runlane.timing_summary`.

The echo agent waits `echo_delay` (0.35 s) before each chunk on purpose, so progress can
be watched: every first-response figure includes that wait, and the output says so next
to each figure (runlane's own share is the rest; `make bench` measures it alone).
Progress lines show run ids, agents, lanes, states, reasons and timings only; the one
text printed is that reply of the demo's own sample message, and nothing is logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.rows import dict_row

from . import log
from .agents.echo import EchoAgent
from .embedded import Embedded
from .maintenance import MaintenanceConfig
from .rows import one
from .tables import render

ORG = "demo-org"
SETUP = """
insert into runlane.platform_settings (org_id, timezone, agent_max_concurrency)
values ('demo-org', 'UTC', 2);
insert into runlane.user_orgs (user_id, org_id) values ('ada', 'demo-org'), ('grace', 'demo-org');
insert into runlane.agent_orgs (agent_id, org_id) values
    ('ada-chat', 'demo-org'), ('grace-chat', 'demo-org'),
    ('digest', 'demo-org'), ('triage', 'demo-org');
insert into runlane.users (user_id, org_id, timezone) values
    ('ada', 'demo-org', 'Europe/Berlin'),
    ('grace', 'demo-org', 'America/New_York');
insert into runlane.agents (agent_id, org_id, owner_id, model, prompt, thread_id, computer_id,
                            schedule) values
    ('ada-chat', 'demo-org', 'ada', 'echo', 'You help Ada.', null, null, ''),
    ('grace-chat', 'demo-org', 'grace', 'echo', 'You help Grace.', null, null, ''),
    ('digest', 'demo-org', 'ada', 'echo', 'Write the morning digest of the build farm.',
     'digest-thread', 'build-box', 'daily at 07:30'),
    ('triage', 'demo-org', 'grace', 'echo', 'Triage the overnight bug reports please.',
     'triage-thread', 'build-box', 'daily at 09:00');
"""
RUNS = """
select run_id, agent_id, lane, trigger, state, reason, attempts, computer_id,
       first_started_at, first_response_at, finished_at
from runlane.runs order by run_id
"""
SUMMARY = """
select r.run_id, r.agent_id, r.lane, r.trigger, r.state, r.reason, r.attempts,
       (t ->> 'run.queue_wait_ms')::bigint as queue_wait_ms,
       (t ->> 'run.first_response_ms')::bigint as first_response_ms,
       (t ->> 'run.total_ms')::bigint as total_ms,
       (select count(*) from runlane.run_events as e
        where e.run_id = r.run_id and e.event = 'routine.coalesced') as coalesced
from runlane.runs as r
cross join lateral runlane.run_timing(r.run_id) as t
order by r.run_id
"""
TIMING = "select * from runlane.timing_summary(p_since => interval '1 hour', p_trigger => %s)"
NEXT_RUN = "select next_run_at from runlane.agents where agent_id = %s"
HELD_FATE = "select run_id from runlane.messages where message_id = %s"
REPLY = "select body from runlane.outputs_since(p_run_id => %s) order by output_id"
UNFINISHED = "select count(*) from runlane.runs where state in ('queued', 'running')"


@dataclass
class DemoResult:
    runs: list[dict[str, Any]] = field(default_factory=list)
    timing: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    agents: list[dict[str, Any]] = field(default_factory=list)
    reply: str = ""  # the visible reply of grace's chat run
    seconds: float = 0.0


class _Progress:
    """Prints each run's transitions as the worker makes them (polls the runs table)."""

    def __init__(self, dsn: str, say: Callable[[str], None], started: float, delay_ms: int = 0):
        self.dsn = dsn
        self.delay_ms = delay_ms
        self.say = say
        self.started = started
        self.seen: dict[int, tuple] = {}

    def line(self, text: str) -> None:
        self.say(f"[{time.monotonic() - self.started:5.1f}s] {text}")

    def poll(self, conn: psycopg.Connection) -> None:
        for r in conn.cursor(row_factory=dict_row).execute(RUNS).fetchall():
            key = (r["state"], r["attempts"], r["first_response_at"] is not None)
            before = self.seen.get(r["run_id"])
            if before == key:
                continue
            self.seen[r["run_id"]] = key
            who = f"run {r['run_id']:>2} {r['agent_id']:<10} {r['lane']:<11}"
            if before is None and r["state"] in ("queued", "skipped"):
                why = f" ({r['reason']})" if r["reason"] else ""
                self.line(f"{who} {r['state']}{why}, trigger {r['trigger']}")
                continue
            if r["state"] == "running" and (before is None or before[0] != "running"):
                box = f" on {r['computer_id']}" if r["computer_id"] else ""
                self.line(f"{who} running{box} (attempt {r['attempts']})")
            if key[2] and not (before and before[2]):
                ms = _ms(r["first_response_at"] - r["first_started_at"])
                self.line(
                    f"{who} first visible output {ms} ms after its start"
                    f" (incl. the echo agent's deliberate {self.delay_ms} ms wait)"
                )
            if r["state"] in ("succeeded", "failed", "canceled"):
                ms = _ms(r["finished_at"] - r["first_started_at"]) if r["first_started_at"] else 0
                self.line(f"{who} {r['state']} after {ms} ms of execution")

    async def run(self, stop: asyncio.Event) -> None:
        conn: psycopg.Connection = await asyncio.to_thread(
            psycopg.connect, self.dsn, autocommit=True
        )
        try:
            while not stop.is_set():
                await asyncio.to_thread(self.poll, conn)
                await asyncio.sleep(0.1)
            await asyncio.to_thread(self.poll, conn)
        finally:
            conn.close()


def _ms(delta: Any) -> int:
    return round(delta.total_seconds() * 1000)


async def _until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"demo: timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def run_demo(
    say: Callable[[str], None] = print, echo_delay: float = 0.35, timeout: float = 45.0
) -> DemoResult:
    """The whole demo; raises if anything in it does not happen as described."""
    log.configure(logging.WARNING)  # the narration below is the output; warnings still show
    started = time.monotonic()
    result = DemoResult()
    agent = EchoAgent(chunks=4, delay=echo_delay)
    say("runlane demo: starting an embedded PostgreSQL (a throwaway cluster)…")
    async with Embedded(
        agent,
        None,
        autostart=False,
        scan_interval=1.0,
        lease=10.0,
        maintenance=MaintenanceConfig(tick_interval=2.0),
    ) as rl:
        delay_ms = round(echo_delay * 1000)
        progress = _Progress(rl.dsn, say, started, delay_ms)
        with psycopg.connect(rl.dsn, autocommit=True) as conn:
            conn.execute(SETUP)
        progress.line(
            "organization demo-org: owners ada (Europe/Berlin) and grace "
            "(America/New_York); agents ada-chat, grace-chat, and digest and "
            "triage sharing the computer build-box"
        )

        # -- 1. the queue fills before the worker is up -----------------------------------
        progress.line("-- before the worker starts --")
        first = await rl.submit_message("ada-chat", "ada-thread", "Hello! What can you do?")
        steer = await rl.submit_message("ada-chat", "ada-thread", "And please keep it short.")
        progress.line(
            f"chat: message 1 -> {first['disposition']} run {first['run_id']}; "
            f"message 2 -> {steer['disposition']} (joins queued run {steer['run_id']})"
        )
        other = await rl.submit_message("grace-chat", "grace-thread", "Good morning!")
        progress.line(f"chat: grace's message -> {other['disposition']} run {other['run_id']}")
        manual = await rl.run_now("digest")
        again = await rl.run_now("digest")
        progress.line(
            f"Run now on digest -> run {manual['run_id']} {manual['state']}; "
            f"pressed again -> run {again['run_id']} {again['state']} "
            f"({again['reason']})"
        )
        result.events.append(f"run_now:{again['state']}:{again['reason']}")

        # The scheduler on a simulated clock: the triage slot, then the next one while the
        # first timer run is still pending.
        cur = rl._api.cursor()
        await cur.execute(NEXT_RUN, ("triage",))
        slot = one(await cur.fetchone())[0]
        for _ in range(2):
            progress.line(
                f"scheduler tick on a simulated clock at {slot:%Y-%m-%d %H:%M} UTC "
                f"(triage's 09:00 in New York):"
            )
            for row in await rl.tick(slot):
                progress.line(f"    {row['agent_id']:<8} {row['event']:<18} run {row['run_id']}")
                result.events.append(row["event"])
            await cur.execute(NEXT_RUN, ("triage",))
            slot = one(await cur.fetchone())[0]

        # -- 2. the worker runs both lanes -------------------------------------------------
        progress.line("-- the embedded worker starts (interactive and background lanes) --")
        progress.line(
            f"the echo agent waits {delay_ms} ms before each chunk ON PURPOSE, so "
            f"progress can be watched: first-response times below include it"
        )
        stop = asyncio.Event()
        watcher = asyncio.create_task(progress.run(stop))
        rl.start_worker()

        async def running() -> bool:
            await cur.execute(
                "select state from runlane.runs where run_id = %s", (first["run_id"],)
            )
            return one(await cur.fetchone())[0] == "running"

        await _until(running, timeout, "the first chat run to start")
        held = await rl.submit_message("ada-chat", "ada-thread", "One more thing!")
        progress.line(f"chat: message 3 while run {first['run_id']} runs -> {held['disposition']}")

        async def all_done() -> bool:
            await cur.execute(UNFINISHED)
            return one(await cur.fetchone())[0] == 0

        await _until(all_done, timeout, "every run to finish")
        stop.set()
        await watcher
        await cur.execute(HELD_FATE, (held["message_id"],))
        taken_by = one(await cur.fetchone())[0]
        progress.line(
            f"message 3 was answered by run {taken_by}"
            + (
                " (taken as steering while it ran)"
                if taken_by == first["run_id"]
                else " (the follow-up run created when the first one finished)"
            )
        )

        # -- 3. a reply, read as a chat client reads it, and the summary -------------------
        await cur.execute(REPLY, (other["run_id"],))
        result.reply = "".join(r[0] for r in await cur.fetchall())
        progress.line(
            f"reply of run {other['run_id']} (grace-chat, read with "
            f"runlane.outputs_since): {result.reply!r}"
        )

        # -- the summary ---------------------------------------------------------------------
        dcur = rl._api.cursor(row_factory=dict_row)
        await dcur.execute(SUMMARY)
        result.runs = await dcur.fetchall()
        for trigger in (None, "interactive"):
            await dcur.execute(TIMING, (trigger,))
            result.timing[trigger or "all"] = {r["measure"]: r for r in await dcur.fetchall()}
        await dcur.execute("select * from runlane.agent_schedules()")
        result.agents = await dcur.fetchall()

    result.seconds = time.monotonic() - started
    columns = [
        "run",
        "agent",
        "lane",
        "trigger",
        "state",
        "reason",
        "attempts",
        "queue wait ms",
        "first response ms",
        "total ms",
        "coalesced ticks",
    ]
    say("")
    say(
        render(
            "Runs",
            columns,
            [
                [
                    r["run_id"],
                    r["agent_id"],
                    r["lane"],
                    r["trigger"],
                    r["state"],
                    r["reason"],
                    r["attempts"],
                    r["queue_wait_ms"],
                    r["first_response_ms"],
                    r["total_ms"],
                    r["coalesced"],
                ]
                for r in result.runs
            ],
        )
    )
    say("")
    rows = []
    for scope, measures in result.timing.items():
        for name, m in measures.items():
            rows.append(
                [scope, name, m["samples"], m["p50_ms"], m["p90_ms"], m["p99_ms"], m["max_ms"]]
            )
    say(render("Timing (ms)", ["triggers", "measure", "samples", "p50", "p90", "p99", "max"], rows))
    say("")
    say(
        render(
            "Agents and their next run, in their own timezone",
            ["agent", "schedule", "timezone", "status", "next run (local)"],
            [
                [
                    a["agent_id"],
                    a["schedule"] or "-",
                    a["timezone"],
                    a["status"],
                    a["next_run_local"],
                ]
                for a in result.agents
            ],
        )
    )
    fr = result.timing["all"]["first_response"]
    say("")
    say(
        f"first response over {fr['samples']} runs: p50 {fr['p50_ms']} ms, "
        f"p90 {fr['p90_ms']} ms; demo took {result.seconds:.1f} s"
    )
    say(
        f"(a first response counts from the message, or the run's creation, to the first "
        f"visible output: it includes the echo agent's deliberate {delay_ms} ms wait before "
        f"its first chunk and, for runs queued before the worker started or waiting for "
        f"their computer, that wait; runlane's own share is the rest, and `make bench` "
        f"measures it alone)"
    )
    return result


def main(say: Callable[[str], None] = print) -> DemoResult:
    return asyncio.run(run_demo(say))
