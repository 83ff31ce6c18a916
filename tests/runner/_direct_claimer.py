"""A minimal new-generation worker for the rolling-upgrade rehearsal (run as a process).

It registers in runlane.workers (generation 2, direct deliveries) and loops over
claim_runs -> append_output ('direct attempt N') -> finish_run, or, with --fail-rate,
retry_run with a short explicit delay. SIGTERM: stop claiming, finish the runs in hand,
mark itself stopped, exit 0. Used until `runlane worker` can stand in for it.

    python tests/runner/_direct_claimer.py --dsn DSN --worker-id ID [--fail-rate F] [--seed S]
        [--limit N] [--work SECONDS]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import threading
import time

import psycopg

CLAIM = ("select run_id, fence, attempt from runlane.claim_runs("
         "p_worker => %(w)s::text, p_lanes => array['interactive', 'background'], "
         "p_limit => %(n)s, p_lease => interval '60 seconds')")
OUTPUT = ("select runlane.append_output(p_run_id => %(r)s::bigint, p_fence => %(f)s::bigint, "
          "p_kind => 'text', p_body => %(b)s::text)")
FINISH = ("select runlane.finish_run(p_run_id => %(r)s::bigint, p_fence => %(f)s::bigint, "
          "p_outcome => 'succeeded')")
RETRY = ("select runlane.retry_run(p_run_id => %(r)s::bigint, p_fence => %(f)s::bigint, "
         "p_error => 'attempt failed', p_delay => %(d)s::interval)")
REGISTER = ("insert into runlane.workers (worker_id, generation, deliveries, lanes, pid) "
            "values (%(w)s, 2, 'direct', '{interactive,background}', %(pid)s) "
            "on conflict (worker_id) do update set heartbeat_at = now(), stopped_at = null")
BEAT = "update runlane.workers set heartbeat_at = now() where worker_id = %(w)s"
STOPPED = "update runlane.workers set stopped_at = now() where worker_id = %(w)s"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--fail-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--work", type=float, default=0.0, help="seconds per attempt")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(REGISTER, {"w": args.worker_id, "pid": os.getpid()})
        while not stop.is_set():
            conn.execute(BEAT, {"w": args.worker_id})
            claimed = conn.execute(CLAIM, {"w": args.worker_id, "n": args.limit}).fetchall()
            for run_id, fence, attempt in claimed:
                params = {"r": run_id, "f": fence}
                time.sleep(args.work)  # the agent's work, simulated
                conn.execute(OUTPUT, {**params, "b": f"direct attempt {attempt}"})
                if rng.random() < args.fail_rate:
                    delay = f"{rng.randint(100, 800)} milliseconds"
                    conn.execute(RETRY, {**params, "d": delay})
                else:
                    conn.execute(FINISH, params)
            if not claimed:
                stop.wait(0.05)
        conn.execute(STOPPED, {"w": args.worker_id})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
