"""Would a claim whose update of runs is HOT close the wake-latency goal?

A design study, not a measure of runlane as it is. durable_compare's durable cluster; in
every round, in turn, one worker each after 20 ms of idleness (publish -> handler start):
  * the floor (bench/_floor_worker.py: LISTEN, one UPDATE ... SKIP LOCKED of a one-table
    queue, commit, handler);
  * the floor's claim writes on runlane's tables (--on-runlane: the run's update, its
    run.claimed journal row and the receipt, one statement), on runs runlane's
    submit_message and publish_run made;
  * the same writes on runlane's tables reshaped so that the run's update is HOT
    (--hot-on-runlane): no index of runs names a column the claim changes (those indexes
    are dropped, and listed), room on every page (fillfactor 50), and the queued runs
    found in a narrow queue table whose entry the claim deletes;
  * the floor with rules (--with-rules: the writes and the checks an idle chat claim
    must make, in one statement on narrow tables built for it);
  * runlane's worker as it is.
It prints each one's p50 against the round's floor, their medians over the rounds, and
how many of the reshaped table's updates were HOT. What the dropped indexes serve (claim
order, caps, the bound, the reaper, unfinished-run lookups) would have to move to narrow
tables of their own before runlane could claim this way: the study says what that would
buy, before anyone builds it.

    python -m bench hot_claim [--quick] [--rounds N] [--idle N]

A diagnostic, never a test: it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg

from bench import _common
from bench import _floor_worker as floor_worker_module
from bench import durable_compare as dc
from runlane.pgcluster import LocalCluster

WARMUP, GAP = 20, 0.02
SYSTEMS = ("floor", "on_runlane", "hot_on_runlane", "with_rules", "runlane")


def reshape_for_hot_claims(dropped: dict[str, str]):
    """The --hot-on-runlane set-up: the narrow queue, fillfactor, and every index of runs
    that names a column the claim changes dropped (recorded in `dropped`, name -> def)."""

    def prepare(conn: psycopg.Connection) -> None:
        conn.execute(floor_worker_module.HOT_RESHAPE)
        indexes = conn.execute("""
            select i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
            from pg_index as i
            where i.indrelid = 'runlane.runs'::regclass and not i.indisprimary
        """).fetchall()
        for name, definition in indexes:
            # the key columns and the predicate, as the definition names them
            named = definition.split(" USING ", 1)[1]
            if any(c in named for c in floor_worker_module.HOT_BLOCKING_COLUMNS):
                conn.execute(f"drop index {name}")
                dropped[name] = named
        conn.execute("vacuum full runlane.runs")  # fillfactor on every page

    return prepare


def hot_updates(conn: psycopg.Connection) -> dict:
    upd, hot = conn.execute("""
        select n_tup_upd, n_tup_hot_upd from pg_stat_user_tables
        where relid = 'runlane.runs'::regclass
    """).fetchone()
    return {"runs_updates": upd, "runs_hot_updates": hot}


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench hot_claim", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--quick", action="store_true", help="1 round of 100 wake-ups")
    ap.add_argument("--rounds", type=int, help="rounds, the five in turn (5; quick 1)")
    ap.add_argument("--idle", type=int, help="wake-ups per system per round (200; quick 100)")
    args = ap.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 5)
    args.idle = args.idle or (100 if args.quick else 200)
    return args


def main(argv=None) -> list[str]:
    args = parse(argv)
    began = time.monotonic()
    dropped: dict[str, str] = {}
    rounds = []
    pg = LocalCluster(settings=dc.CLUSTER_SETTINGS)
    pg.start()
    try:
        dc.runlane_template(pg)
        for r in range(args.rounds):
            one = {
                "load_average": dc.load_average(),
                "floor": dc.floor_latency(pg, args.idle, WARMUP, GAP),
                "on_runlane": dc.floor_latency(
                    pg, args.idle, WARMUP, GAP, mode="--on-runlane", inspect=hot_updates
                ),
                "hot_on_runlane": dc.floor_latency(
                    pg,
                    args.idle,
                    WARMUP,
                    GAP,
                    mode="--hot-on-runlane",
                    prepare=reshape_for_hot_claims(dropped),
                    inspect=hot_updates,
                ),
                "with_rules": dc.floor_latency(pg, args.idle, WARMUP, GAP, mode="--with-rules"),
                "runlane": dc.runlane_latency(pg, args.idle, WARMUP, GAP),
            }
            floor = one["floor"]["p50_ms"]
            one["p50_vs_floor"] = {k: round(one[k]["p50_ms"] / floor, 2) for k in SYSTEMS}
            rounds.append(one)
            print(
                f"  round {r + 1} (load {one['load_average']}): "
                + ", ".join(
                    f"{k} {one[k]['p50_ms']:.2f} ms ({one['p50_vs_floor'][k]:.2f}x)"
                    for k in SYSTEMS
                ),
                flush=True,
            )
    finally:
        pg.destroy()
    medians = {
        k: round(statistics.median(o["p50_vs_floor"][k] for o in rounds), 2) for k in SYSTEMS
    }
    path = _common.write_result(
        "hot_claim",
        {
            "machine": _common.machine(),
            "args": vars(args),
            "rounds": rounds,
            "median_p50_vs_floor": medians,
            "dropped_indexes": dropped,
        },
    )
    last = rounds[-1]
    lines = [
        f"idle publish -> handler start, p50 against each round's floor, medians of "
        f"{len(rounds)} round(s) of {args.idle} wake-ups:"
    ]
    for k, what in (
        ("on_runlane", "the claim's writes on runlane's tables"),
        ("hot_on_runlane", "the same, the run's update HOT (reshaped tables)"),
        ("with_rules", "writes and rules on narrow tables (--with-rules)"),
        ("runlane", "runlane's worker"),
    ):
        lines.append(f"  {what:<50} {medians[k]:.2f}x")
    hot, now = last["hot_on_runlane"], last["on_runlane"]
    lines.append(
        f"  HOT updates of runs, last round (statistics flushed so far): "
        f"{hot['runs_hot_updates']} of {hot['runs_updates']} reshaped, "
        f"{now['runs_hot_updates']} of {now['runs_updates']} as runlane's tables are"
    )
    lines.append(
        f"  indexes of runs dropped for HOT claims ({len(dropped)}): "
        + ", ".join(sorted(n.removeprefix("runlane.") for n in dropped))
    )
    lines.append(f"  ({time.monotonic() - began:.0f} s; {path})")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
