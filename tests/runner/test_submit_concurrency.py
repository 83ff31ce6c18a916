"""submit_message under concurrency: many real connections submit to the same threads at
once, with and without workers claiming, steering and finishing runs in between.

Invariants: at most one unfinished interactive run per thread (checked continuously by a
watcher connection, each check one snapshot), every message attached to a run or held,
none lost, and once the workers drain the threads every message belongs to exactly one
finished run whose source is the earliest of its messages that were not steering."""

from __future__ import annotations

import threading
from collections import Counter

import psycopg
import pytest

SUBMITTERS = 10
MESSAGES_EACH = 30
THREADS = ("thread-1", "thread-2")

SUBMIT = (
    "select message_id, run_id, disposition "
    "from runlane.submit_message(p_agent_id => %(a)s::text, p_thread_id => %(t)s::text, "
    "p_body => %(b)s::text)"
)
PUBLISH = "select runlane.publish_run(p_run_id => %(r)s::bigint)"
UNFINISHED_PER_THREAD = """
    select coalesce(max(n), 0) from (
        select count(*) as n from runlane.runs
        where agent_id = 'agent-a' and lane = 'interactive' and state in ('queued', 'running')
        group by thread_id
    ) as per_thread
"""


def _run_threads(targets):
    errors: list[BaseException] = []

    def guard(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guard(t)) for t in targets]
    for t in threads:
        t.start()
    return threads, errors


def _submitter(dsn, barrier, number, results):
    def run():
        with psycopg.connect(dsn, autocommit=True) as conn:
            barrier.wait()
            for i in range(MESSAGES_EACH):
                thread = THREADS[(number + i) % len(THREADS)]
                row = conn.execute(
                    SUBMIT, {"a": "agent-a", "t": thread, "b": f"message {number}-{i}"}
                ).fetchone()
                results.append((thread, *row))
                if row[1] is not None:
                    # Publish in its own transaction after the commit, as callers must.
                    conn.execute(PUBLISH, {"r": row[1]})

    return run


@pytest.fixture
def agent(conn):
    conn.execute("select runlane_test.agent('agent-a')")
    return "agent-a"


def test_concurrent_submissions_create_one_run_per_thread(db_dsn, conn, agent):
    barrier = threading.Barrier(SUBMITTERS)
    results: list[tuple] = []
    threads, errors = _run_threads(
        [_submitter(db_dsn, barrier, n, results) for n in range(SUBMITTERS)]
    )
    for t in threads:
        t.join()
    assert errors == []

    total = SUBMITTERS * MESSAGES_EACH
    assert len(results) == total
    # With no worker running, each thread has exactly one run: one created, rest steering.
    dispositions = Counter((thread, d) for thread, _m, _r, d in results)
    assert dispositions == Counter(
        {(t, "created"): 1 for t in THREADS}
        | {(t, "steering"): total // len(THREADS) - 1 for t in THREADS}
    )
    runs = conn.execute(
        "select thread_id, run_id, source_message_id from runlane.runs "
        "where agent_id = 'agent-a' and lane = 'interactive' and state = 'queued'"
    ).fetchall()
    assert sorted(r[0] for r in runs) == sorted(THREADS)
    run_of_thread = {thread: run_id for thread, run_id, _ in runs}
    created = {thread: m for thread, m, _r, d in results if d == "created"}
    for thread, _run_id, source in runs:
        assert source == created[thread], "the created message is the run's source"
    # Every message stored, attached to its thread's run, none lost.
    stored = dict(
        conn.execute(
            "select message_id, run_id from runlane.messages where agent_id = 'agent-a'"
        ).fetchall()
    )
    assert len(stored) == total
    for thread, message_id, run_id, _d in results:
        assert run_id == run_of_thread[thread]
        assert stored[message_id] == run_id


def test_submissions_while_workers_claim_steer_and_finish(db_dsn, conn, agent):
    """Submitters race workers that claim, take steering and finish; a watcher checks the
    one-unfinished-run-per-thread invariant the whole time."""
    barrier = threading.Barrier(SUBMITTERS + 3)
    results: list[tuple] = []
    submitting_done = threading.Event()
    watcher_max = [0]
    taken: list[tuple[int, int]] = []  # (run_id, message_id) returned by take_steering

    def watcher():
        with psycopg.connect(db_dsn, autocommit=True) as wconn:
            barrier.wait()
            while True:
                done = submitting_done.is_set()
                (n,) = wconn.execute(UNFINISHED_PER_THREAD).fetchone()
                watcher_max[0] = max(watcher_max[0], n)
                if done:
                    return

    def worker(name):
        def run():
            with psycopg.connect(db_dsn, autocommit=True) as wconn:
                barrier.wait()
                idle_after_done = 0
                while idle_after_done < 3:
                    claimed = wconn.execute(
                        "select run_id, fence from runlane.claim_runs(p_worker => %(w)s::text, "
                        "p_lanes => array['interactive']::text[], p_limit => 2)",
                        {"w": name},
                    ).fetchall()
                    for run_id, fence in claimed:
                        wconn.execute("select * from runlane.run_messages(%s, %s)", (run_id, fence))
                        for (message_id,) in wconn.execute(
                            "select message_id from runlane.take_steering(%s, %s)", (run_id, fence)
                        ).fetchall():
                            taken.append((run_id, message_id))
                        wconn.execute(
                            "select runlane.append_output(%s, %s, 'text', 'ok')", (run_id, fence)
                        )
                        wconn.execute(
                            "select runlane.finish_run(%s, %s, 'succeeded')", (run_id, fence)
                        )
                    if claimed or not submitting_done.is_set():
                        idle_after_done = 0
                    else:
                        idle_after_done += 1

        return run

    targets = [_submitter(db_dsn, barrier, n, results) for n in range(SUBMITTERS)]
    targets += [watcher, worker("worker-1"), worker("worker-2")]
    threads, errors = _run_threads(targets)
    for t in threads[:SUBMITTERS]:
        t.join()
    submitting_done.set()
    for t in threads[SUBMITTERS:]:
        t.join()
    assert errors == []

    assert watcher_max[0] <= 1, "a thread never has two unfinished interactive runs"
    total = SUBMITTERS * MESSAGES_EACH
    assert len(results) == total
    assert {d for *_x, d in results} <= {"created", "steering", "held"}

    # Drained: nothing held, nothing unfinished, every message in exactly one finished run.
    messages = conn.execute(
        "select m.message_id, m.thread_id, m.run_id, r.thread_id, r.state "
        "from runlane.messages as m left join runlane.runs as r using (run_id) "
        "where m.agent_id = 'agent-a'"
    ).fetchall()
    assert len(messages) == total, "no message lost"
    assert {m[0] for m in messages} == {r[1] for r in results}
    held = [m for m in messages if m[2] is None]
    assert held == [], "no message is left held once the thread's runs finished"
    for _id, thread, _run, run_thread, state in messages:
        assert run_thread == thread and state == "succeeded"

    # Steering and created answers stayed true: the message is still in the run it was told.
    attached = {m[0]: m[2] for m in messages}
    for _thread, message_id, run_id, disposition in results:
        if disposition in ("created", "steering"):
            assert attached[message_id] == run_id
    for run_id, message_id in taken:
        assert attached[message_id] == run_id, "a message taken by steering stays in that run"

    # Each run's source is one of its own messages, the earliest one (created or held).
    for run_id, source, earliest in conn.execute(
        "select r.run_id, r.source_message_id, min(m.message_id) "
        "from runlane.runs as r join runlane.messages as m using (run_id) "
        "where r.agent_id = 'agent-a' group by r.run_id, r.source_message_id"
    ).fetchall():
        assert source == earliest, f"run {run_id} counts from its earliest message"
    (orphans,) = conn.execute(
        "select count(*) from runlane.runs as r where r.agent_id = 'agent-a' and not exists "
        "(select 1 from runlane.messages as m where m.run_id = r.run_id)"
    ).fetchone()
    assert orphans == 0, "every run answers at least one message"


@pytest.mark.parametrize(("claim_commits", "expected"), [(True, "held"), (False, "steering")])
def test_submit_during_a_claim_in_progress(db_dsn, conn, agent, claim_commits, expected):
    """A claim holds the queued run's row (as claim_runs' FOR UPDATE does) while a message
    arrives: if the claim commits, the run is running and the message is held for it; if
    it rolls back, the message steers the still-queued run. Never attached behind the
    back of a run that has started."""
    (run_id,) = conn.execute(
        "select run_id from runlane.submit_message('agent-a', 'thread-1', 'first')"
    ).fetchone()
    outcome: list[tuple] = []
    with psycopg.connect(db_dsn) as claimer:
        claimer.execute("select 1 from runlane.runs where run_id = %s for update", (run_id,))
        threads, errors = _run_threads([lambda: outcome.append(_submit_once(db_dsn))])
        claimer.execute("select runlane_test.claimed(%s)", (run_id,))
        if claim_commits:
            claimer.commit()
        else:
            claimer.rollback()
        for t in threads:
            t.join()
    assert errors == []
    ((_message_id, message_run, disposition),) = outcome
    assert disposition == expected
    (state,) = conn.execute(
        "select state from runlane.runs where run_id = %s", (run_id,)
    ).fetchone()
    assert state == ("running" if claim_commits else "queued")
    assert message_run == (None if claim_commits else run_id)
    (unfinished,) = conn.execute(UNFINISHED_PER_THREAD).fetchone()
    assert unfinished == 1


def _submit_once(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(
            SUBMIT, {"a": "agent-a", "t": "thread-1", "b": "during claim"}
        ).fetchone()
