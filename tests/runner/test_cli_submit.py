"""`runlane submit` against a real database: --idempotency-key reaches the keyed
submit_message (a retry returns the first answer and creates nothing), --json prints the
returned row, a blank message is refused with the database's 22023, and the created run
is announced on runlane_runs (send_message: one commit)."""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg


def _submit(dsn: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runlane", "submit", *args, "--dsn", dsn],
        capture_output=True,
        text=True,
    )


def test_a_keyed_submit_retried_returns_the_first_answer(conn, db_dsn):
    conn.execute("select runlane_test.agent('agent-k', 'org-k')")
    args = ("agent-k", "thread-1", "hello", "--idempotency-key", "msg-1", "--json")
    first = _submit(db_dsn, *args)
    assert first.returncode == 0, first.stderr
    answer = json.loads(first.stdout)
    assert answer["disposition"] == "created"
    assert set(answer) == {"message_id", "run_id", "disposition"}
    again = _submit(db_dsn, *args)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == answer
    counts = conn.execute(
        "select (select count(*) from runlane.messages), (select count(*) from runlane.runs), "
        "(select count(*) from runlane.idempotency_keys where idempotency_key = 'msg-1')"
    ).fetchone()
    assert counts == (1, 1, 1)
    other = _submit(db_dsn, "agent-k", "thread-1", "other text", "--idempotency-key", "msg-1")
    assert other.returncode == 2
    assert other.stderr.startswith("RL010")


def test_the_text_output_is_unchanged_without_json(conn, db_dsn):
    conn.execute("select runlane_test.agent('agent-k', 'org-k')")
    out = _submit(db_dsn, "agent-k", "thread-1", "hello")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "message 1 created run 1"


def test_a_blank_message_is_refused_with_22023(conn, db_dsn):
    conn.execute("select runlane_test.agent('agent-k', 'org-k')")
    for body in ("", "  \t "):
        out = _submit(db_dsn, "agent-k", "thread-1", body)
        assert out.returncode == 1, out.stdout
        assert out.stderr.startswith("22023: a message needs a body (p_body)"), out.stderr
        assert "Traceback" not in out.stderr
    assert conn.execute("select count(*) from runlane.messages").fetchone()[0] == 0


def test_a_submit_announces_its_run(conn, db_dsn):
    conn.execute("select runlane_test.agent('agent-n', 'org-n')")
    with psycopg.connect(db_dsn, autocommit=True) as listener:
        listener.execute("listen runlane_runs")
        sent = _submit(db_dsn, "agent-n", "thread-1", "hello", "--json")
        assert sent.returncode == 0, sent.stderr
        run_id = json.loads(sent.stdout)["run_id"]
        notes = [json.loads(n.payload) for n in listener.notifies(timeout=2, stop_after=1)]
    assert notes == [{"run_id": run_id, "lane": "interactive"}]
