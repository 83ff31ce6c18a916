"""Where a run's database CPU goes, measured so that this machine's drift cancels out.

One throwaway cluster with durable_compare's durable settings. Each variant gets its own
database from durable_compare's template (one organization, 20 agents) holding
rounds x page chat runs made by submit_message + publish_run, and one connection doing
what a worker does in a drain: the dispatcher's keyed claim of `page` runs (the per-worker
organization bound at the worker's default), then the finisher's finish_runs of them
as succeeded (a no-op agent), round after round. The variants take turns round by round,
so a slow minute of this shared machine slows every one of them alike: measured one after
the other, the same code can read 118-184 us per run within minutes here, while
within a rep the variants' differences repeat to about 1 us. CPU is each variant's
backend's time on a CPU (/proc/PID/schedstat), the first round left out (plans, caches).

The variants (the base: page 50):
  page 10, page 100        with the base, the cost of a claim + finish pair (b) and of a
                           run (a), from cpu per run = a + b / page (a least-squares fit)
  no journal foreign key   run_events.run_id -> runs dropped: what checking each journal
                           row costs (two per run); a measurement, not a proposal
  --sql FILE               any SQL applied to one more variant's database (a function
                           rewritten, an index dropped): what a change costs or saves

--reps (3; quick 1) runs the whole set again on new databases. Printed: each variant's
median CPU per run and the median of its differences to the base within a rep.

    python -m bench cpu_ledger [--quick] [--rounds N] [--reps N] [--sql FILE ...]

A diagnostic of where runlane's database CPU per run goes (against PgQueuer's
in durable_compare), never a test: it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import psycopg

from bench import _common
from bench import durable_compare as dc
from runlane.pgcluster import LocalCluster
from runlane.worker.config import WorkerConfig
from runlane.worker.dispatcher import CLAIM, CLAIM_SESSION
from runlane.worker.finisher import FINISH_RUNS

BASE_PAGE = 50
WORKER_BOUND = str(WorkerConfig.max_per_org)
DROP_JOURNAL_FOREIGN_KEY = """
do $$
declare
    v_name text;
begin
    select c.conname into strict v_name
    from pg_constraint as c
    where c.conrelid = 'runlane.run_events'::regclass and c.contype = 'f';
    execute format('alter table runlane.run_events drop constraint %I', v_name);
end;
$$
"""


@dataclass
class Variant:
    name: str
    page: int = BASE_PAGE
    sql: str | None = None
    per_run_us: list[float] = field(default_factory=list)


@dataclass
class Lane:
    """One variant's database and connection within a rep."""

    variant: Variant
    conn: psycopg.Connection
    cpu_at_start: float = 0.0
    runs: int = 0


def backend_cpu_ms(pid: int) -> float:
    """The process's time on a CPU so far, in ms, from the scheduler's nanosecond count
    (/proc/PID/stat's clock ticks are 10 ms: 5 us per run at a quick run's 2,000 runs)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e6


def prepare(pg: LocalCluster, variant: Variant, rep: int, index: int, rounds: int) -> Lane:
    dsn = _common.create_database(pg, f"ledger_{rep}_{index}", template=dc.TEMPLATE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        if variant.sql:
            conn.execute(variant.sql)
        left = rounds * variant.page
        while left > 0:
            dc.submit_batch(conn, min(1000, left))
            left -= 1000
    _common.vacuum_analyze(dsn)  # what autovacuum does after such a burst
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(CLAIM_SESSION, {"bound": WORKER_BOUND})
    return Lane(variant, conn)


def claim_and_finish(lane: Lane) -> None:
    """One round: the worker's claim of a page, then one finish_runs of the whole page."""
    page = lane.variant.page
    rows = lane.conn.execute(
        CLAIM,
        {
            "worker": "ledger",
            "lanes": ["interactive"],
            "limit": page,
            "lease": timedelta(seconds=60),
            "claim_key": uuid.uuid4(),
            "handlers": ["default"],
        },
        prepare=True,
    ).fetchall()
    if len(rows) != page:
        raise RuntimeError(f"{lane.variant.name}: claimed {len(rows)} runs, not {page}")
    lane.conn.execute(
        FINISH_RUNS,
        {
            "run_ids": [r[0] for r in rows],
            "fences": [r[1] for r in rows],
            "outcomes": ["succeeded"] * page,
            "errors": [None] * page,
            "costs": [0] * page,
            "counts": [0] * page,
            "kinds": [],
            "bodies": [],
            "seqs": [None] * page,
        },
        prepare=True,
    ).fetchall()
    lane.runs += page


def one_rep(pg: LocalCluster, variants: list[Variant], rep: int, rounds: int) -> None:
    lanes = [prepare(pg, v, rep, i, rounds) for i, v in enumerate(variants)]
    try:
        for lane in lanes:  # the unmeasured first round
            claim_and_finish(lane)
            lane.cpu_at_start = backend_cpu_ms(lane.conn.info.backend_pid)
            lane.runs = 0
        for r in range(1, rounds):
            for lane in lanes if r % 2 else reversed(lanes):
                claim_and_finish(lane)
        for lane in lanes:
            used_ms = backend_cpu_ms(lane.conn.info.backend_pid) - lane.cpu_at_start
            lane.variant.per_run_us.append(used_ms * 1000 / lane.runs)
    finally:
        for i, lane in enumerate(lanes):
            lane.conn.close()
            _common.drop_database(pg, f"ledger_{rep}_{i}")


def fit(variants: list[Variant]) -> tuple[float, float] | None:
    """(a, b) of cpu per run = a + b / page, least squares over the page variants' medians."""
    points = [(1 / v.page, statistics.median(v.per_run_us)) for v in variants if v.sql is None]
    if len({x for x, _ in points}) < 2:
        return None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - b * mx, b


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench cpu_ledger",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="40 rounds, one rep")
    ap.add_argument("--rounds", type=int, help="claim + finish rounds per variant (200)")
    ap.add_argument("--reps", type=int, help="the whole set again on new databases (3)")
    ap.add_argument(
        "--sql",
        action="append",
        default=[],
        metavar="FILE",
        help="one more variant: this SQL applied to its database first",
    )
    args = ap.parse_args(argv)
    args.rounds = args.rounds or (40 if args.quick else 200)
    args.reps = args.reps or (1 if args.quick else 3)
    if args.rounds < 2:
        ap.error("--rounds must be at least 2 (the first is not measured)")
    return args


def main(argv=None) -> list[str]:
    args = parse(argv)
    started = time.monotonic()
    variants = [
        Variant(f"claim + finish, page {BASE_PAGE} (the base)"),
        Variant("page 10", page=10),
        Variant("page 100", page=100),
        Variant("no journal foreign key", sql=DROP_JOURNAL_FOREIGN_KEY),
    ]
    variants += [Variant(Path(f).name, sql=Path(f).read_text()) for f in args.sql]
    pg = LocalCluster(settings=dc.CLUSTER_SETTINGS)
    pg.start()
    try:
        dc.runlane_template(pg)
        for rep in range(args.reps):
            one_rep(pg, variants, rep, args.rounds)
            print(
                f"  rep {rep + 1}: "
                + ", ".join(f"{v.name} {v.per_run_us[-1]:.1f}" for v in variants),
                flush=True,
            )
        info = _common.machine(pg)
    finally:
        pg.destroy()
    base = variants[0]
    lines = [
        f"database CPU per run, one backend claiming and finishing pages of chat runs, "
        f"variants interleaved round by round, {args.rounds} rounds x {args.reps} "
        f"rep(s), durable commits:"
    ]
    for v in variants:
        diffs = [x - y for x, y in zip(v.per_run_us, base.per_run_us, strict=True)]
        delta = "" if v is base else f"  {statistics.median(diffs):+6.1f} us vs the base"
        lines.append(f"  {v.name:<44} {statistics.median(v.per_run_us):6.1f} us/run{delta}")
    fitted = fit(variants)
    if fitted:
        a, b = fitted
        lines.append(
            f"  cost = {a:.0f} us per run + {b:.0f} us per claim + finish pair "
            f"(fit over pages 10, {BASE_PAGE}, 100)"
        )
    lines.append(f"  ({time.monotonic() - started:.0f} s)")
    for line in lines:
        print(line, flush=True)
    _common.write_result(
        "cpu_ledger",
        {
            "machine": info,
            "settings": dc.DURABLE_SETTINGS,
            "rounds": args.rounds,
            "variants": [
                {"name": v.name, "page": v.page, "per_run_us": v.per_run_us} for v in variants
            ],
            "fit_us": {"per_run": fitted[0], "per_pair": fitted[1]} if fitted else None,
        },
    )
    return lines


if __name__ == "__main__":
    main()
