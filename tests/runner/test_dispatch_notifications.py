"""What the message and output functions publish, observed by a real LISTEN connection:
submit_message stays silent (its commit must not depend on a notification), publish_run
announces {run_id, lane}, a follow-up run made from held messages is announced, and
append_output announces {run_id, output_id} without the text."""

from __future__ import annotations

import json

import psycopg
import pytest


def drain(listener: psycopg.Connection, timeout: float = 0.5) -> list[tuple[str, dict]]:
    """Every notification delivered so far (commits happen before this is called)."""
    return [(n.channel, json.loads(n.payload)) for n in listener.notifies(timeout=timeout)]


@pytest.fixture
def listener(db_dsn):
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("listen runlane_runs")
        conn.execute("listen runlane_outputs")
        yield conn


@pytest.fixture
def agent(conn):
    conn.execute("select runlane_test.agent('agent-a')")
    return "agent-a"


def submit(conn, body, thread="thread-1"):
    return conn.execute(
        "select message_id, run_id, disposition from runlane.submit_message('agent-a', %s, %s)",
        (thread, body),
    ).fetchone()


def test_submit_is_silent_and_publish_announces_the_run(conn, listener, agent):
    _m, run_id, disposition = submit(conn, "hello")
    assert disposition == "created"
    assert drain(listener) == [], "submit_message publishes nothing"

    conn.execute("select runlane.publish_run(%s)", (run_id,))
    assert drain(listener) == [("runlane_runs", {"run_id": run_id, "lane": "interactive"})]


def test_publish_failure_loses_nothing(conn, agent):
    _m, run_id, _d = submit(conn, "hello")
    with pytest.raises(psycopg.Error) as info:
        conn.execute("select runlane.publish_run(-1)")
    assert info.value.sqlstate == "RL008"
    (state,) = conn.execute(
        "select state from runlane.runs where run_id = %s", (run_id,)
    ).fetchone()
    assert state == "queued", "the committed run is still there for the scan"


def test_follow_up_run_from_held_messages_is_announced(conn, listener, agent):
    _m, run_id, _d = submit(conn, "first")
    (fence,) = conn.execute("select runlane_test.claimed(%s)", (run_id,)).fetchone()
    held_id, held_run, disposition = submit(conn, "while running")
    assert (held_run, disposition) == (None, "held")
    drain(listener)

    conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run_id, fence))
    (follow_up,) = conn.execute(
        "select run_id from runlane.runs where source_message_id = %s", (held_id,)
    ).fetchone()
    runs_notes = [p for c, p in drain(listener) if c == "runlane_runs"]
    assert {"run_id": follow_up, "lane": "interactive"} in runs_notes


def test_append_output_announces_the_stream_token_never_ids_or_text(conn, listener, agent):
    _m, run_id, _d = submit(conn, "hello")
    (fence,) = conn.execute("select runlane_test.claimed(%s)", (run_id,)).fetchone()
    drain(listener)

    conn.execute(
        "select runlane.append_output(%s, %s, 'reasoning', 'private thoughts')", (run_id, fence)
    )
    conn.execute(
        "select runlane.append_output(%s, %s, 'text', 'the secret reply')", (run_id, fence)
    )
    outputs = [
        oid
        for (oid,) in conn.execute(
            "select output_id from runlane.run_outputs where run_id = %s order by output_id",
            (run_id,),
        )
    ]
    notes = drain(listener)
    (token,) = conn.execute("select runlane.stream_token(%s)", (run_id,)).fetchone()
    assert len(outputs) == 2
    assert notes == [("runlane_outputs", {"stream": token}) for _oid in outputs]
    assert all("secret" not in json.dumps(p) and "private" not in json.dumps(p) for _c, p in notes)
