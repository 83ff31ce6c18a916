"""send_message accepts a chat message and announces its run in one commit, observed by
real LISTEN connections and a real worker: the notification arrives only with the
committed message ({run_id, lane}, as publish_run sends), a steering message sends none,
a rolled-back call sends none and stores nothing, and a worker whose scan is an hour away
runs the message's run on the notification alone."""

from __future__ import annotations

import json

import psycopg
import pytest
import worker_helpers
from worker_helpers import MARKER, make_agent, run_state, wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after


def drain(listener: psycopg.Connection, timeout: float = 0.5) -> list[tuple[str, dict]]:
    """Every notification delivered so far (commits happen before this is called)."""
    return [(n.channel, json.loads(n.payload)) for n in listener.notifies(timeout=timeout)]


@pytest.fixture
def listener(db_dsn):
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("listen runlane_runs")
        yield conn


def send(conn: psycopg.Connection, agent: str, thread: str, body: str) -> tuple:
    return conn.execute(
        "select message_id, run_id, disposition from runlane.send_message(%s, %s, %s)",
        (agent, thread, body),
    ).fetchone()


def test_the_run_is_announced_with_its_commit_and_only_then(conn, listener):
    conn.execute("select runlane_test.agent('agent-a')")
    with conn.transaction():
        _m, run_id, disposition = send(conn, "agent-a", "thread-1", "hello")
        assert disposition == "created"
        assert drain(listener, 0.2) == [], "nothing is delivered before the commit"
    assert drain(listener) == [("runlane_runs", {"run_id": run_id, "lane": "interactive"})]

    _m, steered, disposition = send(conn, "agent-a", "thread-1", "and more")
    assert (steered, disposition) == (run_id, "steering")
    assert drain(listener) == [], "a steering message joins a run already announced"

    with conn.transaction(force_rollback=True):
        send(conn, "agent-a", "thread-2", "never mind")
    assert drain(listener) == [], "a rolled-back message announces nothing"
    assert (
        conn.execute(
            "select count(*) from runlane.messages where thread_id = 'thread-2'"
        ).fetchone()[0]
        == 0
    )


def test_a_listening_worker_runs_the_message_without_its_scan(conn, workers):
    make_agent(conn, "agent-sent")
    worker = workers("--no-maintenance", "--scan-interval", "3600")
    worker.wait_for("dispatch.ready")
    worker.wait_for("listener.listening")
    _m, run_id, disposition = send(conn, "agent-sent", "thread-1", f"hello {MARKER}")
    assert disposition == "created"
    wait_until(
        lambda: run_state(conn, run_id) == "succeeded",
        what="the sent message's run ran on its notification (the scan is an hour away)",
    )
