"""Handlers with real workers: each `runlane worker --agent NAME=module:attr` claims only
runs whose agent's handler it serves and runs them with that code (the context names the
handler); a run of a handler no worker serves stays queued and `runlane status` names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import worker_helpers
from worker_helpers import make_agent, run_state, submit, visible_outputs, wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after


def cli(*args: str, dsn: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runlane", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "RUNLANE_DSN": dsn},
    )


def with_handler(conn, agent_id: str, handler: str) -> None:
    make_agent(conn, agent_id)
    conn.execute(
        "select runlane.put_agent(%s, jsonb_build_object('handler', %s::text))", (agent_id, handler)
    )


def test_each_worker_claims_only_the_handlers_it_serves(conn, db_dsn, workers):
    with_handler(conn, "chat-1", "chat")
    with_handler(conn, "code-1", "code")
    with_handler(conn, "research-1", "research")
    chat_worker = workers("--no-maintenance", "--agent", "chat=handler_agent:chat")
    code_worker = workers("--no-maintenance", "--agent", "code=handler_agent:code")
    chat_worker.wait_for("dispatch.ready")
    code_worker.wait_for("dispatch.ready")
    research = submit(conn, "research-1", "thread-r", "look this up")
    runs = {
        agent: [submit(conn, agent, f"thread-{agent}-{i}", "hello") for i in range(4)]
        for agent in ("chat-1", "code-1")
    }
    for agent, run_ids in runs.items():
        for run_id in run_ids:
            wait_until(lambda r=run_id: run_state(conn, r) == "succeeded", what=f"{agent} run")
            name = agent.split("-")[0]
            assert [body for _, body in visible_outputs(conn, run_id)] == [f"{name} ran {name}"]

    registered = dict(
        conn.execute(
            "select worker_id, handlers from runlane.workers where worker_id = any(%s)",
            ([chat_worker.worker_id, code_worker.worker_id],),
        ).fetchall()
    )
    assert registered == {chat_worker.worker_id: ["chat"], code_worker.worker_id: ["code"]}

    assert run_state(conn, research) == "queued"
    status = cli("status", dsn=db_dsn)
    assert status.returncode == 0, status.stderr
    assert "handler research: 1 queued interactive runs, no worker serves it" in status.stdout
    assert "handler chat" not in status.stdout
    as_json = json.loads(cli("status", "--json", dsn=db_dsn).stdout)
    assert [(h["handler"], h["lane"], h["queued"]) for h in as_json["unserved_handlers"]] == [
        ("research", "interactive", 1)
    ]

    # A worker that serves it, under its own name: the waiting run is claimed and the
    # handler leaves the status.
    research_worker = workers("--no-maintenance", "--agent", "research=handler_agent:chat")
    research_worker.wait_for("dispatch.ready")
    wait_until(lambda: run_state(conn, research) == "succeeded", what="the research run")
    assert [body for _, body in visible_outputs(conn, research)] == ["chat ran research"]
    assert "no worker serves it" not in cli("status", dsn=db_dsn).stdout


def test_a_handler_named_twice_or_malformed_is_a_usage_error(db_dsn):
    for args in (
        ["--agent", "a=handler_agent:chat", "--agent", "a=handler_agent:code"],
        ["--agent", "Bad Name=handler_agent:chat"],
    ):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "runlane",
                "worker",
                "--dsn",
                db_dsn,
                "--lane",
                "interactive",
                *args,
            ],
            capture_output=True,
            text=True,
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(
                    [str(worker_helpers.HERE), os.environ.get("PYTHONPATH", "")]
                ),
            },
        )
        assert result.returncode == 2, result.stderr
        assert "handler" in result.stderr
