"""Claim latency after retention: 1,000,000 finished runs purged, then 1,000,000 new ones.

Goal: claim latency with 1,000,000 purged-and-refilled rows stays
within claim_history's goal: its p50 over the p50 of a database with 10,000 finished runs
stays under 1.3. Also reported: the purge rate (runs per second through
runlane.purge_finished, in the maintenance leader's batches) and p99.

The purged database is cloned from the same template as claim_history's (100
organizations, 1,000 agents) and lives through retention: N finished runs (claim_history's
mix of lanes, triggers and terminal states) with what a run leaves behind, one output,
one `run.finished` journal row and, for chat runs, their source message; all of them aged
past 8 days by an UPDATE (as time would, leaving dead row versions); all purged with
`purge_finished('8 days', batch)` called until it returns 0, each call its own
transaction; then N new finished runs (within the last 8 days, so kept); then claim
_history's queued runs. The reference database gets claim_history's small history and
the same queued runs. Both are VACUUM ANALYZEd before the measured calls (as in
claim_history); the purged one is also measured BEFORE that vacuum (autovacuum only, as a
purge leaves it), for information. Calls are claim_history's (`claim_runs(p_limit => 5)`
over both lanes, rolled back), alternating between the databases in rounds.

    python -m bench claim_after_purge [--quick] [--runs N] [--batch N] [--calls N]
                                      [--proposed-index]

Without an index on runs.source_message_id, each message the purge deletes costs a
sequential scan of runlane.runs (the foreign key runs.source_message_id -> messages is
checked for it), so the purge rate falls as the table grows; --proposed-index creates
PROPOSED_INDEX in the template first, to measure the purge with it (not yet a migration).

--quick: 100,000 runs and fewer calls (a quick check of the scenario, not the goal).
A purge that has not finished after --purge-budget seconds (900) ends the scenario: the
purge rate is then the result, and claims are not measured.
"""

from __future__ import annotations

import argparse
import time

import psycopg

from bench import _common
from bench.claim_history import (
    AGENTS,
    GOAL,
    HISTORY,
    LIMIT,
    ORGS,
    QUEUED,
    TEMPLATE,
    build,
    one_claim,
)

# What those runs leave behind: an output and a journal row each, a source message for
# each chat run.
LEFTOVERS = [
    """
    insert into runlane.run_outputs (run_id, attempt, kind, body, created_at)
    select r.run_id, 1, 'final', 'done', r.finished_at
    from runlane.runs as r where r.run_id > %(after)s and r.state <> 'skipped'
    """,
    """
    insert into runlane.run_events (run_id, event, created_at)
    select r.run_id, 'run.finished', r.finished_at
    from runlane.runs as r where r.run_id > %(after)s
    """,
    """
    with m as (
        insert into runlane.messages (org_id, agent_id, thread_id, body, created_at, run_id)
        select r.org_id, r.agent_id, r.thread_id, 'hello', r.created_at, r.run_id
        from runlane.runs as r where r.run_id > %(after)s and r.lane = 'interactive'
        returning message_id, run_id
    )
    update runlane.runs as r set source_message_id = m.message_id
    from m where r.run_id = m.run_id
    """,
]
AGE = """
update runlane.runs
set created_at = created_at - interval '30 days',
    first_started_at = first_started_at - interval '30 days',
    finished_at = finished_at - interval '30 days'
where finished_at is not null
"""
PROPOSED_INDEX = """
create index if not exists runs_source_message_idx on runlane.runs (source_message_id)
where source_message_id is not null
"""
PURGE = "select runlane.purge_finished(p_older_than => interval '8 days', p_limit => %(n)s::int)"
COUNTS = """
select (select count(*) from runlane.runs where finished_at is not null),
       (select count(*) from runlane.run_outputs),
       (select count(*) from runlane.run_events),
       (select count(*) from runlane.messages)
"""


def fill(conn: psycopg.Connection, count: int) -> None:
    after = conn.execute("select coalesce(max(run_id), 0) from runlane.runs").fetchone()[0]
    # claim_history's mix of finished runs, finished within the last 7 days (kept by an
    # 8-day purge, with a day's margin for a slow load), appended after the highest run id.
    conn.execute(
        HISTORY,
        {
            "count": count,
            "orgs": ORGS,
            "agents": AGENTS,
            "newest_age": "1 minute",
            "spread_s": 604800,
        },
    )
    for sql in LEFTOVERS:
        conn.execute(sql, {"after": after})


def purge(conn: psycopg.Connection, batch: int, budget: float) -> tuple[int, list[float], bool]:
    """Calls purge_finished until it returns 0 or `budget` seconds have passed;
    (runs purged, seconds of each call, whether it finished)."""
    total, seconds = 0, []
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        t0 = time.perf_counter()
        n = conn.execute(PURGE, {"n": batch}).fetchone()[0]
        seconds.append(time.perf_counter() - t0)
        total += n
        if n == 0:
            return total, seconds, True
    return total, seconds, False


def build_purged(pg, name: str, runs: int, batch: int, budget: float) -> tuple[str, dict]:
    dsn = _common.create_database(pg, name, template=TEMPLATE)
    report: dict = {"runs": runs, "batch": batch}
    with psycopg.connect(dsn, autocommit=True) as conn:
        t0 = time.monotonic()
        fill(conn, runs)
        report["fill_s"] = round(time.monotonic() - t0, 1)
        report["rows_before_purge"] = conn.execute(COUNTS).fetchone()
        print(
            f"  filled {runs:,} runs in {report['fill_s']} s (runs, outputs, events, "
            f"messages: {report['rows_before_purge']})",
            flush=True,
        )
        t0 = time.monotonic()
        conn.execute(AGE)
        report["age_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        purged, seconds, finished = purge(conn, batch, budget)
        elapsed = time.monotonic() - t0
        if finished and purged != runs:
            raise RuntimeError(f"purge_finished deleted {purged} runs, expected {runs}")
        if not finished:
            rate = purged / elapsed
            report.update(
                purge_s=round(elapsed, 1),
                purged=purged,
                purge_runs_per_s=round(rate, 1),
                purge_calls=len(seconds),
                purge_unfinished=True,
                purge_rest_estimate_h=round((runs - purged) / rate / 3600, 1),
            )
            print(
                f"  aged in {report['age_s']} s; the purge stopped after its budget of "
                f"{budget:.0f} s: {purged:,} of {runs:,} runs ({rate:,.1f} runs/s)",
                flush=True,
            )
            return dsn, report
        left = conn.execute(COUNTS).fetchone()
        if left != (0, 0, 0, 0):
            raise RuntimeError(
                f"rows left after the purge (runs, outputs, events, messages): {left}"
            )
        ms = [s * 1000 for s in seconds[:-1]] or [0.0]
        report.update(
            purge_s=round(elapsed, 1),
            purge_runs_per_s=round(purged / elapsed),
            purge_calls=len(seconds),
            purge_call_p50_ms=round(_common.percentile(ms, 0.5), 1),
            purge_call_max_ms=round(max(ms), 1),
        )
        print(
            f"  aged in {report['age_s']} s; purged in {report['purge_s']} s "
            f"({report['purge_runs_per_s']:,} runs/s)",
            flush=True,
        )
        t0 = time.monotonic()
        fill(conn, runs)
        report["refill_s"] = round(time.monotonic() - t0, 1)
        if conn.execute(PURGE, {"n": batch}).fetchone()[0] != 0:
            raise RuntimeError("the refilled runs are within 8 days: nothing may be purged")
        _common.seed_queued_runs(conn, QUEUED, orgs=ORGS)
        conn.execute("analyze")
    return dsn, report


def measure(conns: dict[str, psycopg.Connection], calls: int) -> dict[str, list[float]]:
    """claim_history's loop: warm-up, then rounds alternating between the databases."""
    timings: dict[str, list[float]] = {label: [] for label in conns}
    rounds, per_round = 10, max(1, calls // 10)
    for conn in conns.values():
        for _ in range(30):
            one_claim(conn)
    for _ in range(rounds):
        for label, conn in conns.items():
            timings[label].extend(one_claim(conn) for _ in range(per_round))
    return timings


def stats(values: list[float]) -> dict:
    ms = [v * 1000 for v in values]
    return {
        "calls": len(ms),
        "p50_ms": round(_common.percentile(ms, 0.5), 3),
        "p90_ms": round(_common.percentile(ms, 0.9), 3),
        "p99_ms": round(_common.percentile(ms, 0.99), 3),
    }


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench claim_after_purge", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--quick", action="store_true", help="100,000 runs, fewer calls")
    ap.add_argument("--runs", type=int, help="runs purged, then refilled (1,000,000)")
    ap.add_argument(
        "--small", type=int, default=10_000, help="finished runs of the reference database"
    )
    ap.add_argument(
        "--batch",
        type=int,
        default=1000,
        help="runs per purge_finished call (the maintenance leader's 1000)",
    )
    ap.add_argument("--calls", type=int, help="measured calls per database (600)")
    ap.add_argument(
        "--purge-budget",
        type=float,
        default=900.0,
        help="seconds the purge may take; past them the scenario stops and "
        "reports the purge rate (claims are not measured)",
    )
    ap.add_argument(
        "--proposed-index",
        action="store_true",
        help="create PROPOSED_INDEX (runs.source_message_id) first",
    )
    args = ap.parse_args(argv)
    args.runs = args.runs or (100_000 if args.quick else 1_000_000)
    args.calls = args.calls or (150 if args.quick else 600)
    return args


def _load() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def _unfinished(args, report: dict, info: dict, load_before: str, started: float) -> list[str]:
    """The purge did not finish within its budget: its rate is the result."""
    summary = [
        f"claim latency after retention: NOT MEASURED, the purge did not finish (load "
        f"{load_before} -> {_load()})",
        f"  purge: {report['purged']:,} of {args.runs:,} runs in {report['purge_s']} s = "
        f"{report['purge_runs_per_s']:,} runs/s ({report['purge_calls']} calls of "
        f"{args.batch}); the rest would take about {report['purge_rest_estimate_h']} h",
        "  (each purged message costs a scan of runlane.runs without an index on "
        "runs.source_message_id: try --proposed-index)",
    ]
    path = _common.write_result(
        "claim_after_purge",
        {
            "machine": info,
            "load_before": load_before,
            "retention": report,
            "proposed_index": args.proposed_index,
            "goal": GOAL,
            "measured": False,
        },
    )
    summary.append(f"  ({time.monotonic() - started:.0f} s; {path})")
    print("\n".join(summary))
    return summary


def main(argv=None) -> list[str]:
    args = parse(argv)
    started = time.monotonic()
    load_before = _load()
    with _common.cluster() as pg:
        dsn = _common.migrated_database(pg, TEMPLATE)
        with psycopg.connect(dsn, autocommit=True) as conn:
            _common.seed_agents(conn, agents=AGENTS, orgs=ORGS)
            if args.proposed_index:
                conn.execute(PROPOSED_INDEX)
        reference = build(pg, "bench_purge_reference", args.small)
        purged, report = build_purged(
            pg, "bench_purge_refilled", args.runs, args.batch, args.purge_budget
        )
        if report.get("purge_unfinished"):
            info = _common.machine(pg)
            return _unfinished(args, report, info, load_before, started)
        print(f"  refilled in {report['refill_s']} s; measuring", flush=True)

        conns = {"reference": psycopg.connect(reference), "refilled": psycopg.connect(purged)}
        try:
            before_vacuum = measure(conns, args.calls)
            _common.vacuum_analyze(purged)
            after_vacuum = measure(conns, args.calls)
        finally:
            for conn in conns.values():
                conn.close()
        info = _common.machine(pg)

    ref, unvacuumed = stats(before_vacuum["reference"]), stats(before_vacuum["refilled"])
    ref_after, big = stats(after_vacuum["reference"]), stats(after_vacuum["refilled"])
    ratio50 = big["p50_ms"] / ref_after["p50_ms"]
    ratio99 = big["p99_ms"] / ref_after["p99_ms"]
    ratio50_unvacuumed = unvacuumed["p50_ms"] / ref["p50_ms"]
    verdict = "meets" if ratio50 < GOAL else "MISSES"
    summary = [
        f"claim latency after retention, claim_runs(p_limit => {LIMIT}) over both lanes, "
        f"{QUEUED} queued runs, {big['calls']} calls each (load {load_before} -> {_load()})"
        + (", with the proposed index on runs.source_message_id" if args.proposed_index else "")
        + ":",
        f"  purge: {args.runs:,} runs with their outputs, journal and messages in "
        f"{report['purge_s']} s = {report['purge_runs_per_s']:,} runs/s (batches of "
        f"{args.batch}: p50 {report['purge_call_p50_ms']} ms, max "
        f"{report['purge_call_max_ms']} ms per call)",
        f"  {args.small:>9,} finished runs (reference): p50 {ref_after['p50_ms']:.3f} ms, "
        f"p99 {ref_after['p99_ms']:.3f} ms",
        f"  {args.runs:>9,} purged + {args.runs:,} refilled: p50 {big['p50_ms']:.3f} ms, "
        f"p99 {big['p99_ms']:.3f} ms",
        f"  ratio p50 {ratio50:.2f} (goal < {GOAL}: {verdict}), p99 {ratio99:.2f}",
        f"  before VACUUM (autovacuum only): p50 {unvacuumed['p50_ms']:.3f} ms vs "
        f"{ref['p50_ms']:.3f} ms, ratio {ratio50_unvacuumed:.2f}, p99 "
        f"{unvacuumed['p99_ms']:.3f} ms",
    ]
    path = _common.write_result(
        "claim_after_purge",
        {
            "machine": info,
            "load_before": load_before,
            "retention": report,
            "proposed_index": args.proposed_index,
            "reference": {"finished_runs": args.small, **ref_after},
            "refilled": {"purged_runs": args.runs, "finished_runs": args.runs, **big},
            "before_vacuum": {"reference": ref, "refilled": unvacuumed},
            "ratio_p50": round(ratio50, 3),
            "ratio_p99": round(ratio99, 3),
            "goal": GOAL,
        },
    )
    summary.append(f"  ({time.monotonic() - started:.0f} s; {path})")
    print("\n".join(summary))
    return summary


if __name__ == "__main__":
    main()
