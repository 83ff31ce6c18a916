"""A client in another language: clients/node/follow.js (node + the `pg` package from
npm, installed by `make test` through the Makefile's node-client target) submits a
message through a login that holds only runlane_api, streams with LISTEN +
outputs_since, and stops at the README's end of stream, against a real worker. Its
outputs must be the database's, in order, nothing missing or repeated, and its exit code
follows `runlane follow`'s. A held message is followed to the run that answers it
(message_status)."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
import worker_helpers
from psycopg.conninfo import conninfo_to_dict
from worker_helpers import DEADLINE, make_agent, submit, wait_until

from runlane.stream import FOLLOW_EXIT

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "node"


@pytest.fixture
def node() -> str:
    path = shutil.which("node")
    assert path and (CLIENT / "node_modules" / "pg" / "package.json").exists(), (
        "node or the pg package is missing: `make test` (or `make node-client`) installs them"
    )
    return path


@pytest.fixture
def api_dsn(db_dsn, conn):
    """A login role holding runlane_api and nothing else, as a URL (node's pg reads those)."""
    role = f"node_client_{uuid.uuid4().hex[:8]}"
    parts = conninfo_to_dict(db_dsn)
    db = parts["dbname"]
    conn.execute(f'create role "{role}" login in role runlane_api')
    conn.execute("select runlane.scope_api_login(%s, null)", (role,))
    conn.execute(f'grant connect on database "{db}" to "{role}"')
    yield f"postgresql://{role}@{parts['host']}:{parts['port']}/{db}"
    conn.execute(f'revoke connect on database "{db}" from "{role}"')
    conn.execute(f'drop role "{role}"')


def run_client(node: str, *args: str) -> tuple[int, list[dict], str]:
    out = subprocess.run(
        [node, str(CLIENT / "follow.js"), *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        cwd=CLIENT,
    )
    return out.returncode, [json.loads(line) for line in out.stdout.splitlines()], out.stderr


def database_outputs(conn, run_id: int) -> list[dict]:
    rows = conn.execute(
        "select output_id, attempt, kind, body from runlane.outputs_since(%s, 0, 10000)", (run_id,)
    ).fetchall()
    return [
        {
            "event": "output",
            "run_id": run_id,
            "output_id": oid,
            "attempt": attempt,
            "kind": kind,
            "body": body,
        }
        for oid, attempt, kind, body in rows
    ]


def test_node_submits_streams_and_stops_at_the_end_of_a_retried_run(
    node, conn, db_dsn, api_dsn, workers
):
    make_agent(conn, "agent-node")
    workers("--agent", "attempt_agent:agent", env={"ATTEMPT_AGENT_FAILS": "1"})
    code, lines, err = run_client(node, api_dsn, "agent-node", "thread-n", "hello from node")
    assert code == 0, err
    submitted, *streamed, end = lines
    assert submitted["event"] == "submitted" and submitted["disposition"] == "created"
    run_id = submitted["run_id"]
    assert (
        conn.execute(
            "select body from runlane.messages where message_id = %s", (submitted["message_id"],)
        ).fetchone()[0]
        == "hello from node"
    )

    through = conn.execute("select runlane.superseded_through(%s)", (run_id,)).fetchone()[0]
    expected = database_outputs(conn, run_id)
    cut = next(i for i, o in enumerate(expected) if o["output_id"] > through)
    expected[cut:cut] = [{"event": "superseded", "run_id": run_id, "through": through}]
    assert streamed == expected  # every output once, in order, the marker after attempt 1's
    assert [o["body"] for o in expected[cut + 1 :]] == [
        "[a2 part 0]",
        "[a2 part 1]",
        "[a2 part 2]",
        "[a2 reply]",
    ]

    status = conn.execute(
        "select state, reason, attempt, last_output_id from runlane.run_status(%s)", (run_id,)
    ).fetchone()
    assert end == {
        "event": "end",
        "run_id": run_id,
        "state": status[0],
        "reason": status[1],
        "attempt": status[2],
        "last_output_id": status[3],
        "superseded_through": through,
    }
    assert status[:3] == ("succeeded", None, 2)


def test_node_follows_a_failed_run_and_exits_like_runlane_follow(
    node, conn, db_dsn, api_dsn, workers
):
    make_agent(conn, "agent-nf")
    run_id = submit(conn, "agent-nf", "thread-n", "fail for me", publish=False)
    conn.execute("update runlane.runs set max_attempts = 1 where run_id = %s", (run_id,))
    conn.execute("select runlane.publish_run(%s)", (run_id,))
    workers("--agent", "attempt_agent:agent", env={"ATTEMPT_AGENT_FAILS": "9"})
    code, lines, err = run_client(node, api_dsn, "--run", str(run_id))
    assert code == FOLLOW_EXIT["failed"] == 3, err
    assert lines[:-1] == database_outputs(conn, run_id)
    assert (lines[-1]["event"], lines[-1]["state"]) == ("end", "failed")


def test_node_exits_like_runlane_follow_for_a_canceled_and_an_unknown_run(node, conn, api_dsn):
    make_agent(conn, "agent-nc")
    run_id = submit(conn, "agent-nc", "thread-n", "never mind")
    conn.execute("select runlane.cancel_run(%s)", (run_id,))
    code, lines, err = run_client(node, api_dsn, "--run", str(run_id))
    assert code == FOLLOW_EXIT["canceled"] == 4, err
    assert lines == [
        {
            "event": "end",
            "run_id": run_id,
            "state": "canceled",
            "reason": "canceled",
            "attempt": 0,
            "last_output_id": None,
            "superseded_through": 0,
        }
    ]
    code, lines, err = run_client(node, api_dsn, "--run", "987654")
    assert code == FOLLOW_EXIT["unknown"] == 6 and lines == [] and err.startswith("RL008")


def test_node_follows_a_held_message_to_its_run_and_stops_when_that_run_ends(node, conn, api_dsn):
    make_agent(conn, "agent-nh")
    first = submit(conn, "agent-nh", "thread-h", "first", publish=False)
    fence = conn.execute("select runlane_test.claimed(%s)", (first,)).fetchone()[0]
    client = subprocess.Popen(
        [node, str(CLIENT / "follow.js"), api_dsn, "agent-nh", "thread-h", "while it runs"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=CLIENT,
    )
    try:
        held = wait_until(
            lambda: conn.execute(
                "select message_id from runlane.messages where agent_id = 'agent-nh' "
                "and run_id is null"
            ).fetchone(),
            what="the client's message held behind the running run",
        )[0]
        # The thread's run ends: the held message's follow-up run is made; the client
        # finds it through message_status and follows it to its end.
        conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (first, fence))
        follow_up = conn.execute(
            "select run_id from runlane.messages where message_id = %s", (held,)
        ).fetchone()[0]
        assert follow_up is not None and follow_up != first
        second = conn.execute("select runlane_test.claimed(%s)", (follow_up,)).fetchone()[0]
        conn.execute(
            "select runlane.append_output(%s, %s, 'text', 'the answer')", (follow_up, second)
        )
        conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (follow_up, second))
        out, err = client.communicate(timeout=DEADLINE)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    assert client.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[0] == {
        "event": "submitted",
        "message_id": held,
        "run_id": None,
        "disposition": "held",
    }
    assert lines[1:] == [
        {"event": "answered_by", "message_id": held, "run_id": follow_up},
        *database_outputs(conn, follow_up),
        {
            "event": "end",
            "run_id": follow_up,
            "state": "succeeded",
            "reason": None,
            "attempt": 1,
            "last_output_id": database_outputs(conn, follow_up)[-1]["output_id"],
            "superseded_through": 0,
        },
    ]
