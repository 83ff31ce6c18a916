"""Keyed submit_message and run_now under concurrent retries: eight real connections send
the same call with the same key at once, one of them first and still uncommitted while
the other seven arrive. Exactly one message and run (one run for run_now) exist
afterwards and all eight answers are equal; when the first call rolls back instead, one
of the waiters goes first and the others get its answer."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

CALLERS = 8
SUBMIT = (
    "select message_id, run_id, disposition from runlane.submit_message("
    "p_agent_id => 'agent-a', p_thread_id => 'thread-1', p_body => 'hello', "
    "p_idempotency_key => 'retry-1')"
)
RUN_NOW = (
    "select run_id, state, reason, prompt from runlane.run_now("
    "p_agent_id => 'agent-a', p_idempotency_key => 'press-1')"
)
WAITING = (
    "select count(*) from pg_stat_activity "
    "where datname = current_database() and wait_event_type = 'Lock' "
    "and pid <> pg_backend_pid()"
)


def _wait_for_waiters(conn, expected):
    """Poll until `expected` backends wait on a lock (the first caller's key row); a
    deadline only to fail instead of hanging."""
    deadline = time.monotonic() + 60
    while conn.execute(WAITING).fetchone()[0] < expected:
        assert time.monotonic() < deadline, "the retries never waited on the first call's key"
        time.sleep(0.02)


def _race(db_dsn, sql, commit_first):
    """The first caller calls inside an open transaction; the other seven start together
    (a barrier) and wait on its key row; then the first commits or rolls back."""
    answers: list[tuple] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(CALLERS - 1)

    def caller():
        try:
            with psycopg.connect(db_dsn, autocommit=True) as c:
                barrier.wait()
                answers.append(c.execute(sql).fetchone())
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    with psycopg.connect(db_dsn) as first, psycopg.connect(db_dsn, autocommit=True) as watch:
        first_answer = first.execute(sql).fetchone()  # uncommitted
        threads = [threading.Thread(target=caller) for _ in range(CALLERS - 1)]
        for t in threads:
            t.start()
        _wait_for_waiters(watch, CALLERS - 1)
        if commit_first:
            first.commit()
            answers.append(first_answer)
        else:
            first.rollback()
        for t in threads:
            t.join()
    assert errors == []
    return answers


@pytest.fixture
def agent(conn):
    conn.execute("select runlane_test.agent('agent-a')")
    return "agent-a"


@pytest.mark.parametrize("commit_first", [True, False], ids=["first-commits", "first-rolls-back"])
def test_concurrent_submit_with_one_key_creates_one_message(db_dsn, conn, agent, commit_first):
    answers = _race(db_dsn, SUBMIT, commit_first)
    assert len(answers) == (CALLERS if commit_first else CALLERS - 1)
    assert len(set(answers)) == 1, answers
    message_id, run_id, disposition = answers[0]
    assert disposition == "created"
    assert conn.execute("select count(*) from runlane.messages").fetchone()[0] == 1
    assert conn.execute("select array_agg(run_id) from runlane.runs").fetchone()[0] == [run_id]
    assert conn.execute("select count(*) from runlane.idempotency_keys").fetchone()[0] == 1


@pytest.mark.parametrize("commit_first", [True, False], ids=["first-commits", "first-rolls-back"])
def test_concurrent_run_now_with_one_key_creates_one_run(db_dsn, conn, agent, commit_first):
    answers = _race(db_dsn, RUN_NOW, commit_first)
    assert len(answers) == (CALLERS if commit_first else CALLERS - 1)
    assert len(set(answers)) == 1, answers
    run_id, state, reason, prompt = answers[0]
    assert (state, reason, prompt) == ("queued", None, None)
    # Not even a skipped already_running run: the retries created nothing.
    assert conn.execute("select array_agg(run_id) from runlane.runs").fetchone()[0] == [run_id]
