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

Then the claim's round trip, rung by rung: what one claim of one run costs a client
that waited --gap seconds (caches cold, as for the worker), from one psycopg connection
(prepared statements, autocommit: each claim its own durable commit), the rungs taken in
turn in every round, their order alternating:
  1. the floor's claim: UPDATE ... FOR UPDATE SKIP LOCKED ... RETURNING of a one-table,
     one-index queue (durable_compare's floor);
  2. the floor's claim making the writes a durable, fenced, idempotent claim must make:
     a fence and a lease on the claimed row, a run.claimed journal row, the claim
     receipt, one statement on small tables of its own (what the writes cost, apart from
     the shape of runlane.runs);
  3. the same single UPDATE on runlane.runs, setting what a claim sets (state, fence,
     attempt, lease, heartbeat, first start): the run row and the indexes its new version
     enters;
  4. rung 3 with the run.claimed journal row and the claim receipt written by the same
     statement: every write a keyed claim must make, in one statement;
  5. runlane.claim_runs, the worker's call (keyed, the worker's default --max-per-org);
  6. rung 5 on a connection with synchronous_commit off: its commit does not wait for
     the WAL flush. Not how runlane works (a claim lost with the flush could hand its
     fence out again after a crash): what the flush costs the claim, of the gap;
  7. a hand-off: the run was claimed for this worker before the wait (by claim_runs, as
     publish_run would if it handed a chat run to an idle worker in its own transaction),
     and the worker only reads what it was handed: a read by primary key, no write, no
     flush. Not how runlane works: the figure for deciding whether it should.
Rungs 2 to 4 write tables directly (the bench's superuser): they measure what the
writes cost, they are not a claim anyone should use (no fairness, bound, gates, computer
leases, resend). For the rungs on runlane's runs the publisher's call is timed too
(publish_run; for the hand-off, publish_run and claim_runs for the worker in one
transaction, the bench's own function) and printed with the claim as one sum, publish to
the worker holding the run: what a hand-off saves end to end, apart from what it moves
out of the worker's wake-up into the publisher's call.

Then claim_runs from inside: marked copies of it (clock marks between its statements)
claim one chat run each after the same idleness, in turn; the first as it is, the others
each without one part of its claim statement (the timing row, the journal row, the
iteration cap, all three): each part's time, and what a part of the claim costs.

With --storm N, N background runs wait in the queue behind their organization's cap the
whole time (a schedule storm): the chat wake-up beside a background backlog.

    python -m bench wake_hops [--quick] [--idle N] [--gap S] [--ladder N] [--parts N]
                              [--storm N]

A diagnostic for the wake-latency goal, never a test: it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import psycopg

from bench import _common
from bench import _floor_worker as floor_worker_module
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

HOPS = (
    ("publish -> notification", "published", "notified"),
    ("notification -> claim sent", "notified", "sent"),
    ("claim sent -> reply read", "sent", "replied"),
    ("reply read -> first step", "replied", "stepped"),
    ("publish -> first step", "published", "stepped"),
)


class Marks:
    """Wraps the listener's and the dispatcher's methods to take the four marks; as the
    worker's agent (an object with `step`), it takes the last and finishes the run."""

    def __init__(self):
        self.at: dict[str, list[float]] = {
            k: [] for k in ("notified", "sent", "replied", "stepped")
        }

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
    worker = Worker(WorkerConfig(dsn=dsn, lanes=["interactive"], agent=marks, maintenance=None))
    task = asyncio.create_task(worker.run())
    await asyncio.sleep(2)  # started, listening, its first (empty) pass made
    publisher = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PUBLISHER,
        dsn,
        str(warmup + idle),
        str(gap),
        stdout=asyncio.subprocess.PIPE,
    )
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
        hops[name] = {
            "p50_ms": round(statistics.median(ms), 3),
            "p99_ms": round(_common.percentile(ms, 0.99), 3),
        }
    return hops


# -- the claim's round trip, rung by rung -------------------------------------------------

# The claim's writes on runlane's runs, with nothing else: durable_compare's floor
# --on-runlane, the same statements (the key as psycopg sends it).
LADDER_RUN_UPDATE = floor_worker_module.RUNLANE_CLAIM_UPDATE + "returning r.run_id, r.fence"
LADDER_ALL_WRITES = floor_worker_module.CLAIM_ON_RUNLANE.replace("$1", "%(claim_key)s")
LADDER_HANDED_READ = """
    select r.run_id, r.fence from runlane.runs as r
    where r.run_id = %(run_id)s and r.state = 'running' and r.lease_owner = %(worker)s
"""
# The floor's claim making the writes a durable, fenced, idempotent claim must make:
# durable_compare's floor --with-writes, the same statement (its key as psycopg sends it).
LADDER_SMALL_WRITES = floor_worker_module.CLAIM_WITH_WRITES.replace("$1", "%(claim_key)s")


class Rung(NamedTuple):
    name: str
    statement: str  # (the very statement the rung stands for; returns run id then fence)
    queue: str | None = None  # a small table's rung: the table its publisher inserts into
    asynchronous: bool = False  # its commit does not wait for the WAL flush


RUNGS = (
    Rung("floor: one UPDATE of a one-table queue", floor_worker_module.CLAIM, queue="floor_queue"),
    Rung("floor + fence, lease, journal, receipt", LADDER_SMALL_WRITES, queue="floor_writes_queue"),
    Rung("the run's claim UPDATE alone", LADDER_RUN_UPDATE),
    Rung("+ journal row and receipt, one statement", LADDER_ALL_WRITES),
    Rung("runlane.claim_runs (the worker's call)", dispatcher_module.CLAIM),
    Rung("claim_runs, commit not waiting for flush", dispatcher_module.CLAIM, asynchronous=True),
    Rung("hand-off: read the run claimed for it", LADDER_HANDED_READ),
)


LEASE = timedelta(seconds=60)

# The hand-off's publisher: publish_run and the claim for the worker in one transaction, as
# publish_run would do it (one commit; the bench's own function, not runlane's).
LADDER_HAND_OFF = """
create function public.ladder_publish_and_hand(
    p_run_id bigint, p_worker text, p_lanes text[], p_limit int, p_lease interval, p_key uuid
)
returns setof bigint
language plpgsql
as $$
begin
    perform runlane.publish_run(p_run_id);
    return query
    select c.run_id from runlane.claim_runs(p_worker, p_lanes, p_limit, p_lease, p_key, true) as c;
end;
$$;
"""


def claim_ladder(dsn: str, rounds: int, warmup: int, gap: float) -> dict:
    """Each rung's round trip (ms, p50 and p90) over `rounds` rounds after `warmup`; for the
    rungs on runlane's runs also the publisher's call (publish_run, or for the hand-off
    publish_run and the claim in one transaction) and the two together, end to end: what
    a hand-off saves, not what it moves out of the worker's wake-up into the publisher's."""
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute(floor_worker_module.TABLE)
        setup.execute(floor_worker_module.WRITES_TABLES)
        setup.execute(LADDER_HAND_OFF)
        setup.execute(floor_worker_module.RUNLANE_RECEIPT)
    publisher = psycopg.connect(dsn, autocommit=True)
    claimers = {
        False: psycopg.connect(dsn, autocommit=True),
        True: psycopg.connect(dsn, autocommit=True, options="-c synchronous_commit=off"),
    }
    bound = {"bound": str(WorkerConfig.max_per_org)}
    for conn in claimers.values():
        conn.execute(dispatcher_module.CLAIM_SESSION, bound)
    # The publisher's bound only: a hand-off's claim applies the worker's bound like the
    # worker's, but it shares its transaction with the publish, which must be flushed.
    publisher.execute("select set_config('runlane.max_per_org', %(bound)s::text, false)", bound)
    took: dict[str, list[float]] = {rung.name: [] for rung in RUNGS}
    publishing: dict[str, list[float]] = {rung.name: [] for rung in RUNGS if not rung.queue}
    try:
        for i in range(warmup + rounds):
            order = list(enumerate(RUNGS))
            for n, rung in order if i % 2 == 0 else reversed(order):
                params = {
                    "worker": "ladder-worker",
                    "lanes": ["interactive"],
                    "limit": 10,
                    "lease": LEASE,
                    "claim_key": uuid.uuid4(),
                    "handlers": ["default"],
                    "run_id": None,
                }
                if rung.queue:
                    publisher.execute(f"insert into {rung.queue} default values")
                else:
                    run_id = params["run_id"] = publisher.execute(
                        "select run_id from runlane.submit_message('agent1', %s, 'ladder')",
                        (f"ladder-{i}-{n}",),
                    ).fetchone()[0]
                    started = time.perf_counter()
                    if rung.statement is LADDER_HANDED_READ:  # handed over before the wait
                        handed = publisher.execute(
                            "select * from public.ladder_publish_and_hand(%(run_id)s, "
                            "%(worker)s, %(lanes)s, %(limit)s, %(lease)s, %(claim_key)s)",
                            params,
                            prepare=True,
                        ).fetchall()
                        if [r[0] for r in handed] != [run_id]:
                            raise RuntimeError(f"the hand-off claimed {handed}, not {run_id}")
                    else:
                        publisher.execute("select runlane.publish_run(%s)", (run_id,), prepare=True)
                    published_ms = (time.perf_counter() - started) * 1000
                time.sleep(gap)
                started = time.perf_counter()
                row = (
                    claimers[rung.asynchronous]
                    .execute(
                        rung.statement,
                        None if rung.statement is floor_worker_module.CLAIM else params,
                        prepare=True,
                    )
                    .fetchone()
                )
                ms = (time.perf_counter() - started) * 1000
                if row is None:
                    raise RuntimeError(f"rung {rung.name!r} claimed nothing in round {i}")
                if not rung.queue:
                    if row[0] != run_id:
                        raise RuntimeError(f"rung {rung.name!r} claimed run {row[0]}, not {run_id}")
                    publisher.execute(
                        "select runlane.finish_run(%s::bigint, %s::bigint, 'succeeded')",
                        (run_id, row[1]),
                    )
                if i >= warmup:
                    took[rung.name].append(ms)
                    if not rung.queue:
                        publishing[rung.name].append(published_ms)
    finally:
        publisher.close()
        for claimer in claimers.values():
            claimer.close()
    rungs = {
        name: {
            "p50_ms": round(statistics.median(ms), 3),
            "p90_ms": round(_common.percentile(ms, 0.9), 3),
        }
        for name, ms in took.items()
    }
    for name, ms in publishing.items():
        rungs[name]["publish_p50_ms"] = round(statistics.median(ms), 3)
        rungs[name]["end_to_end_p50_ms"] = round(
            statistics.median(p + c for p, c in zip(ms, took[name], strict=True)), 3
        )
    return rungs


# -- inside claim_runs: the idle claim's time, part by part --------------------------------

CLAIM_RUNS_SQL = Path(__file__).resolve().parent.parent / "sql/functions/dispatch/claim_runs.sql"

# Where a mark is taken in the marked copy: before each of these lines of claim_runs (the
# part named ends there). A change of claim_runs that moves one fails here, loudly.
PART_ENDS = (
    ("arguments checked", "    -- STEP: resend replay."),
    (
        "queue probe + receipt lock",
        "        if not v_eligible and v_key is distinct from p_claim_key then",
    ),
    ("resend checks", "    -- STEP: the per-worker organization bound"),
    ("the worker's bound row locked", "    -- STEP: idle chat fast path."),
    ("idle statement: find, lock, order", "        if v_idle and cardinality(v_accepted) = 0 then"),
    ("fence floor", "    -- STEP: the claim write:"),
    ("claim statement", "    -- STEP: the receipt, for a keyed claim"),
    ("receipt written", "    -- Every run locked was left queued"),
)
PARTS = (*(name for name, _ in PART_ENDS), "the rest", "in the function")

# The claim statement's parts, each taken out of a copy of its own: what the part costs
# is what its copy saves (none of these copies is a claim anyone should use).
_TIMING_ROW = """runlane._timing_of(o.run, coalesce(m.created_at, (o.run).created_at))
        || jsonb_build_object('event', 'run.execution_started')"""
_ITERATION_CAP = """(
            select s.agent_iteration_cap
            from runlane.platform_settings as s
            where s.org_id = (o.run).org_id
        )"""


def _claim_runs_source() -> str:
    """The six-argument claim_runs, as installed (its file, up to its comment)."""
    text = CLAIM_RUNS_SQL.read_text()
    start = text.index("create or replace function runlane.claim_runs(")
    return text[
        start : text.index(
            "comment on function runlane.claim_runs(text, text[], int, interval, uuid, boolean)"
        )
    ]


def _between(text: str, start: str, end: str) -> str:
    return text[text.index(start) : text.index(end)]


def _copy_edits(source: str) -> dict[str, list[tuple[str, str]]]:
    """The copies: claim_runs as it is, and without each part of its claim statement."""
    source_row = _between(
        source,
        "    left join lateral (\n        select source.created_at",
        "    order by o.position;",
    )
    journal = _between(
        source,
        "    journal as (\n        insert into runlane.run_events",
        "    select\n        (o.run).run_id,",
    )
    select = "\n    select\n        (o.run).run_id"
    journal_end = ("    )," + select, "    )" + select)
    no_timing = [(_TIMING_ROW, "null::jsonb"), (source_row, "")]
    no_journal = [(journal, ""), journal_end]
    return {
        "as is": [],
        "no timing row": no_timing,
        "no journal row": no_journal,
        "no iteration cap": [(_ITERATION_CAP, "null::int")],
        "the UPDATE alone": [*no_timing, *no_journal, (_ITERATION_CAP, "null::int")],
    }


def _marked_copy(source: str, name: str, edits: list[tuple[str, str]]) -> str:
    """claim_runs as public.<name>, with clock marks at PART_ENDS and the edits made; it
    raises the marks as a notice before it returns (an idle claim's one way out)."""
    text = source.replace("runlane.claim_runs(", f"public.{name}(", 1)
    text = text.replace(
        "    v_eligible boolean;\n",
        "    v_eligible boolean;\n    v_marks timestamptz[] := array[clock_timestamp()];\n",
        1,
    )
    for old, new in [*((end, None) for _, end in PART_ENDS), *edits]:
        if text.count(old) != 1:
            raise RuntimeError(
                f"claim_runs changed: {old.strip()[:60]!r} is not in it once; "
                f"update bench/wake_hops.py"
            )
        if new is None:
            indent = old[: len(old) - len(old.lstrip())]
            new = f"{indent}v_marks := v_marks || clock_timestamp();\n{old}"
        text = text.replace(old, new)
    last = text.rindex("end;\n$$;")
    return (
        text[:last] + "    v_marks := v_marks || clock_timestamp();\n"
        "    raise notice '%', v_marks;\n" + text[last:]
    )


def claim_parts(dsn: str, rounds: int, warmup: int, gap: float) -> dict:
    """Each part's p50 (us) inside claim_runs for one idle chat claim after `gap` seconds,
    from marked copies of it taken in turn; and each copy's round trip (ms)."""
    source = _claim_runs_source()
    edits = _copy_edits(source)
    copies = {label: f"wake_hops_claim_{n}" for n, label in enumerate(edits)}
    with psycopg.connect(dsn, autocommit=True) as setup:
        for label, name in copies.items():
            setup.execute(_marked_copy(source, name, edits[label]))
    publisher = psycopg.connect(dsn, autocommit=True)
    claimer = psycopg.connect(dsn, autocommit=True)
    notices: list[str] = []
    claimer.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
    claimer.execute(dispatcher_module.CLAIM_SESSION, {"bound": str(WorkerConfig.max_per_org)})
    took = {label: {part: [] for part in PARTS} for label in copies}
    trips: dict[str, list[float]] = {label: [] for label in copies}
    try:
        for i in range(warmup + rounds):
            labels = list(copies) if i % 2 == 0 else list(reversed(copies))
            for label in labels:
                run_id = publisher.execute(
                    "select run_id from runlane.submit_message('agent1', %s, 'parts')",
                    (f"parts-{i}-{copies[label]}",),
                ).fetchone()[0]
                publisher.execute("select runlane.publish_run(%s)", (run_id,), prepare=True)
                time.sleep(gap)
                notices.clear()
                started = time.perf_counter()
                claim = dispatcher_module.CLAIM.replace(
                    "runlane.claim_runs(", f"public.{copies[label]}("
                )
                rows = claimer.execute(
                    claim,
                    {
                        "worker": "parts-worker",
                        "lanes": ["interactive"],
                        "limit": 10,
                        "lease": LEASE,
                        "claim_key": uuid.uuid4(),
                        "handlers": ["default"],
                    },
                    prepare=True,
                ).fetchall()
                ms = (time.perf_counter() - started) * 1000
                if [r[0] for r in rows] != [run_id] or len(notices) != 1:
                    raise RuntimeError(
                        f"copy {label!r} claimed {[r[0] for r in rows]} (not "
                        f"[{run_id}]) with {len(notices)} notices"
                    )
                publisher.execute(
                    "select runlane.finish_run(%s::bigint, %s::bigint, 'succeeded')",
                    (run_id, rows[0][1]),
                )
                if i < warmup:
                    continue
                marks = [
                    datetime.fromisoformat(m.strip('"')) for m in notices[0].strip("{}").split(",")
                ]
                if len(marks) != len(PART_ENDS) + 2:
                    raise RuntimeError(f"copy {label!r} took {len(marks)} marks: not the idle path")
                spans = [
                    (b - a).total_seconds() * 1e6 for a, b in zip(marks, marks[1:], strict=False)
                ]
                whole = (marks[-1] - marks[0]).total_seconds() * 1e6
                for part, us in zip(PARTS, [*spans, whole], strict=True):
                    took[label][part].append(us)
                trips[label].append(ms)
    finally:
        publisher.close()
        claimer.close()
    return {
        label: {
            "parts_p50_us": {
                part: round(statistics.median(us), 1) for part, us in took[label].items()
            },
            "round_trip_p50_ms": round(statistics.median(trips[label]), 3),
        }
        for label in copies
    }


# A schedule storm held back by its organization's cap (--storm N): N queued background
# runs of an organization allowed one running run, one agent each (every fourth a "Run
# now" run, claim class 0; the others scheduled, class 1), analyzed, as autovacuum would.
STORM = (
    "insert into runlane.platform_settings (org_id, agent_max_concurrency) values ('storm', 1)",
    "insert into runlane.users (user_id, org_id) values ('storm-owner', 'storm')",
    """insert into runlane.agents (agent_id, org_id, owner_id, model, prompt)
       select 'storm' || g, 'storm', 'storm-owner', 'noop', 'do nothing'
       from generate_series(1, %(runs)s::int) as g""",
    """insert into runlane.runs (org_id, agent_id, lane, trigger, prompt, model)
       select 'storm', 'storm' || g, 'background',
              case when g %% 4 = 0 then 'manual' else 'scheduled' end, 'do nothing', 'noop'
       from generate_series(1, %(runs)s::int) as g""",
    "analyze runlane.runs",
)


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench wake_hops",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="100 wake-ups")
    ap.add_argument("--idle", type=int, help="measured wake-ups (300; quick 100)")
    ap.add_argument("--warmup", type=int, default=20, help="unmeasured wake-ups first")
    ap.add_argument("--gap", type=float, default=0.02, help="seconds between messages")
    ap.add_argument("--ladder", type=int, help="rounds of the claim ladder (200; quick 60)")
    ap.add_argument(
        "--storm",
        type=int,
        default=0,
        help="queued background runs held back by their cap, beside the chat traffic (0)",
    )
    ap.add_argument("--parts", type=int, help="rounds of claim_runs' marked copies (150; quick 50)")
    args = ap.parse_args(argv)
    if args.idle is None:
        args.idle = 100 if args.quick else 300
    if args.ladder is None:
        args.ladder = 60 if args.quick else 200
    if args.parts is None:
        args.parts = 50 if args.quick else 150
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
            for statement in STORM if args.storm else ():
                conn.execute(statement, {"runs": args.storm} if "%(runs)s" in statement else None)
            conn.execute("create extension if not exists pg_stat_statements")
            conn.execute("select pg_stat_statements_reset()")
            hops = asyncio.run(measure(dsn, args.idle, args.warmup, args.gap))
            claim_us = conn.execute(
                "select round((total_exec_time / calls * 1000)::numeric, 1) "
                "from pg_stat_statements where query like %s and toplevel "
                "order by calls desc limit 1",
                ("%runlane.claim_runs(%p_claim_key%",),
            ).fetchone()
        ladder = claim_ladder(dsn, args.ladder, args.warmup, args.gap)
        parts = claim_parts(dsn, args.parts, args.warmup, args.gap)
        info = _common.machine(pg)
    finally:
        pg.destroy()
    storm = f", {args.storm} background runs queued behind their cap" if args.storm else ""
    lines = [
        f"idle wake-up hops, one in-process worker, one chat message every "
        f"{args.gap * 1000:.0f} ms, {args.idle} measured, durable commits{storm}:"
    ]
    for name, _, _ in HOPS:
        lines.append(
            f"  {name:<28} p50 {hops[name]['p50_ms']:>7.3f}  p99 {hops[name]['p99_ms']:>7.3f} ms"
        )
    lines.append(
        f"  the worker's claim statement: {claim_us[0] if claim_us else '?'} us per "
        f"call (pg_stat_statements, top level)"
    )
    lines.append(
        f"one claim of one run after {args.gap * 1000:.0f} ms idle, round trip from "
        f"psycopg, {args.ladder} rounds (the rungs in turn):"
    )
    floor_p50 = ladder[RUNGS[0].name]["p50_ms"]
    for name in (r.name for r in RUNGS):
        rung = ladder[name]
        lines.append(
            f"  {name:<42} p50 {rung['p50_ms']:>6.3f} ({rung['p50_ms'] / floor_p50:.2f}x"
            f" the floor)  p90 {rung['p90_ms']:>6.3f} ms"
        )
    lines.append(
        "publish + the claim, end to end (the publisher's call, then the worker's; "
        "p50 of the sums):"
    )
    for name in (r.name for r in RUNGS if "end_to_end_p50_ms" in ladder[r.name]):
        rung = ladder[name]
        lines.append(
            f"  {name:<42} publish {rung['publish_p50_ms']:>6.3f} + claim "
            f"{rung['p50_ms']:>6.3f}: {rung['end_to_end_p50_ms']:>6.3f} ms"
        )
    lines.append(
        f"inside claim_runs, one idle chat claim after {args.gap * 1000:.0f} ms idle, "
        f"p50 us per part, {args.parts} rounds (marked copies, taken in turn; each "
        f"later copy leaves one part of the claim statement out):"
    )
    lines.append(f"  {'':<36}" + "".join(f"{label:>17}" for label in parts))
    for part in PARTS:
        lines.append(
            f"  {part:<36}"
            + "".join(f"{parts[label]['parts_p50_us'][part]:>17.1f}" for label in parts)
        )
    lines.append(
        f"  {'round trip, ms':<36}"
        + "".join(f"{parts[label]['round_trip_p50_ms']:>17.3f}" for label in parts)
    )
    lines.append(f"  ({time.monotonic() - started:.0f} s)")
    for line in lines:
        print(line, flush=True)
    _common.write_result(
        "wake_hops",
        {
            "machine": info,
            "settings": dc.DURABLE_SETTINGS,
            "storm": args.storm,
            "idle": args.idle,
            "gap_s": args.gap,
            "hops": hops,
            "claim_ladder": {"rounds": args.ladder, "rungs": ladder},
            "claim_parts": {"rounds": args.parts, "copies": parts},
            "claim_statement_us": float(claim_us[0]) if claim_us else None,
        },
    )
    return lines


if __name__ == "__main__":
    main()
