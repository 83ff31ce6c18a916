"""finish_runs' together path (runlane._finish_runs_together) under concurrent chat traffic.

A batch finished together locks its runs, closes them, then takes their threads' locks;
a chat message sent to one of those threads meanwhile is either held for the finishing run
and then handed to a follow-up run by the finish, or, once the finish committed, starts or
joins a run itself. Several finishers commit batches while several clients keep writing
to the same threads: no message may be left held with nobody to run it, none may join
two runs, no batch may deadlock, and every batch must take the together path (else this
would test the run-by-run path, which test_thread_lock_order.py covers)."""

from __future__ import annotations

import random
import threading

import psycopg
from worker_helpers import claimed_chat_run, make_agent

from runlane.worker import FINISH_RUNS, pg_array

THREADS = 12
ROUNDS = 4
FINISHERS = 4
SENDERS = 3


def finish_params(runs: list[tuple[int, int]]) -> dict:
    n = len(runs)
    return {
        k: pg_array(v)
        for k, v in {
            "run_ids": [r[0] for r in runs],
            "fences": [r[1] for r in runs],
            "outcomes": ["succeeded"] * n,
            "errors": [None] * n,
            "costs": [0] * n,
            "counts": [1] * n,
            "kinds": ["final"] * n,
            "bodies": ["reply"] * n,
            "seqs": [1] * n,
        }.items()
    }


def test_concurrent_batches_and_messages_leave_no_message_behind(conn, db_dsn):
    agents = [make_agent(conn, f"agent-race-{i}") for i in range(2)]
    threads = [(agents[i % 2], f"thread-{i}") for i in range(THREADS)]
    errors: list[BaseException] = []
    results: list[tuple] = []
    run_by_run: list[int] = []  # per batch, runs that went through _require_owner

    def sender(index: int, stop: threading.Event) -> None:
        rng = random.Random(index)
        try:
            with psycopg.connect(db_dsn, autocommit=True) as mine:
                while not stop.is_set():
                    agent, thread = rng.choice(threads)
                    mine.execute(
                        "select * from runlane.submit_message(%s, %s, 'more')", (agent, thread)
                    )
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    def finisher(batch: list[tuple[int, int]]) -> None:
        try:
            with psycopg.connect(db_dsn, autocommit=True) as mine, mine.transaction():
                mine.execute("set local track_functions = 'pl'")
                results.extend(mine.execute(FINISH_RUNS, finish_params(batch)).fetchall())
                run_by_run.append(
                    mine.execute(
                        "select coalesce(sum(calls), 0) from pg_stat_xact_user_functions "
                        "where schemaname = 'runlane' and funcname = '_require_owner'"
                    ).fetchone()[0]
                )
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    for _round in range(ROUNDS):
        # Every thread's unfinished run claimed (its first, or the follow-up a finish made).
        runs = []
        for agent, thread in threads:
            queued = conn.execute(
                "select run_id from runlane.runs where agent_id = %s and thread_id = %s "
                "and state = 'queued'",
                (agent, thread),
            ).fetchone()
            if queued:
                runs.append(
                    (
                        queued[0],
                        conn.execute("select runlane_test.claimed(%s)", (queued[0],)).fetchone()[0],
                    )
                )
            else:
                runs.append(claimed_chat_run(conn, agent, thread))
        random.Random(_round).shuffle(runs)
        batches = [runs[i::FINISHERS] for i in range(FINISHERS)]
        stop = threading.Event()
        senders = [threading.Thread(target=sender, args=(i, stop)) for i in range(SENDERS)]
        finishers = [threading.Thread(target=finisher, args=(b,)) for b in batches]
        for t in senders + finishers:
            t.start()
        for t in finishers:
            t.join(60)
        stop.set()
        for t in senders:
            t.join(60)
        assert not errors, errors

    assert len(results) == THREADS * ROUNDS
    assert all(r[1] and r[4] is None for r in results), "every run finished, none refused"
    assert run_by_run == [0] * (FINISHERS * ROUNDS), "every batch was finished together"
    held = conn.execute(
        """
        select count(*) from runlane.messages as m
        where m.agent_id = any(%s) and m.run_id is null
          and not exists (
              select from runlane.runs as r
              where r.agent_id = m.agent_id and r.thread_id = m.thread_id
                and r.lane = 'interactive' and r.state = 'running')
        """,
        (agents,),
    ).fetchone()[0]
    assert held == 0, "no message is held while its thread has no running run"
    assert (
        conn.execute(
            "select count(*) from runlane.messages as m join runlane.runs as r using (run_id) "
            "where m.agent_id = any(%s) and (r.agent_id, r.thread_id) <> (m.agent_id, m.thread_id)",
            (agents,),
        ).fetchone()[0]
        == 0
    ), "each message joined a run of its own thread"
    assert (
        conn.execute(
            "select count(*) from (select agent_id, thread_id from runlane.runs "
            "where agent_id = any(%s) and lane = 'interactive' and state in ('queued', 'running') "
            "group by 1, 2 having count(*) > 1) as d",
            (agents,),
        ).fetchone()[0]
        == 0
    ), "a thread never has two unfinished chat runs"
