"""A lost acknowledgement costs a pause, never a duplicate, a false
failure or a false log line. Real workers talk to PostgreSQL through a TCP proxy that lets
the server execute and commit one chosen statement, then drops its reply (closes the
connection instead of forwarding it); the worker resends on a fresh connection."""

from __future__ import annotations

import pytest
import worker_helpers
from reply_dropping_proxy import ReplyDroppingProxy
from stream_agent import chunk
from worker_helpers import (
    DEADLINE,
    WorkerProcess,
    background_run,
    make_agent,
    run_row,
    submit,
    wait_until,
)

workers_direct = worker_helpers.workers  # real workers without the proxy


@pytest.fixture
def proxy(db_dsn):
    relay = ReplyDroppingProxy.for_dsn(db_dsn).start()
    yield relay
    relay.close()


@pytest.fixture
def proxied_workers(db_dsn, proxy):
    """Real worker processes connected through the proxy; logs checked afterwards."""
    started: list[WorkerProcess] = []

    def start(*args: str, **kwargs) -> WorkerProcess:
        worker = WorkerProcess(proxy.dsn(db_dsn), *args, **kwargs)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.close()
    for worker in started:
        worker.check_logs()


def test_a_lost_step_write_reply_streams_each_chunk_exactly_once(conn, proxy, proxied_workers):
    make_agent(conn, "agent-stream")
    run_id = submit(conn, "agent-stream", "thread-1", "stream me six chunks")
    proxy.arm(chunk(2).encode())  # the third step's write: outputs and checkpoint
    worker = proxied_workers(
        "--agent",
        "stream_agent:agent",
        "--lease",
        "30",
        env={"STREAM_AGENT_CHUNKS": "6", "STREAM_AGENT_DELAY": "0.01"},
    )
    wait_until(lambda: run_row(conn, run_id)["state"] == "succeeded", what="run succeeded")
    assert proxy.dropped.is_set(), "the proxy dropped the step write's reply"

    stream = conn.execute(
        "select kind, body from runlane.outputs_since(%s, 0, 1000)", (run_id,)
    ).fetchall()
    assert [body for _, body in stream] == [chunk(n) for n in range(6)], (
        "every chunk exactly once, in order"
    )
    assert run_row(conn, run_id)["attempts"] == 1
    assert not worker.events("run.lease_lost")


@pytest.mark.parametrize("lost", [0, 1])
def test_a_lost_reply_of_the_first_visible_output_still_logs_the_first_response_once(
    conn, proxy, proxied_workers, lost
):
    """Chunk 0's write is the run's first visible output: its resend brings the row the
    lost reply carried. Chunk 1's resend brings it too (the attempt is what the database
    can tell), and the worker, which logged it from chunk 0's reply, logs it once."""
    make_agent(conn, "agent-first")
    run_id = submit(conn, "agent-first", "thread-1", "stream me three chunks")
    proxy.arm(chunk(lost).encode())  # that step's write (outputs and checkpoint)
    worker = proxied_workers(
        "--agent",
        "stream_agent:agent",
        "--lease",
        "30",
        env={"STREAM_AGENT_CHUNKS": "3", "STREAM_AGENT_DELAY": "0.01"},
    )
    wait_until(lambda: run_row(conn, run_id)["state"] == "succeeded", what="run succeeded")
    assert proxy.dropped.is_set(), "the proxy dropped the first output's reply"
    worker.wait_for("run.finished", where=lambda r: r.get("run.id") == run_id)
    # The resend was answered as applied and brought the row the lost reply carried.
    firsts = [r for r in worker.events("run.first_response") if r.get("run.id") == run_id]
    assert len(firsts) == 1, firsts
    timing = conn.execute("select runlane.run_timing(%s)", (run_id,)).fetchone()[0]
    assert firsts[0]["run.first_response_ms"] == timing["run.first_response_ms"]
    assert [r for r in worker.events("run.lease_lost") if r.get("run.id") == run_id] == []


def test_a_lost_claim_reply_still_runs_the_claimed_run_at_once(conn, proxy, proxied_workers):
    make_agent(conn, "agent-claim")
    run_id = background_run(conn, "agent-claim")
    proxy.arm(b"claim_runs")  # the worker's first claim: it takes the run
    # A lease far beyond the deadline: the run succeeding proves nobody waited it out.
    worker = proxied_workers("--lease", "600", "--no-maintenance", lanes=("background",))
    wait_until(
        lambda: run_row(conn, run_id)["state"] in ("succeeded", "failed"),
        DEADLINE,
        what="the claimed run was executed",
    )
    assert proxy.dropped.is_set(), "the proxy dropped the claim's reply"
    row = run_row(conn, run_id)
    assert (row["state"], row["attempts"], row["fence"]) == ("succeeded", 1, 1)
    assert row["lease_owner"] is None
    worker.wait_for("run.finished", where=lambda r: r.get("run.id") == run_id)


def test_a_lost_finish_reply_is_not_a_lost_lease(conn, proxy, proxied_workers):
    make_agent(conn, "agent-finish")
    run_id = background_run(conn, "agent-finish")
    proxy.arm(b"finish_run")  # finish_runs (batched) or finish_run (alone)
    worker = proxied_workers("--lease", "30", "--no-maintenance", lanes=("background",))
    wait_until(
        lambda: (
            run_row(conn, run_id)["state"] != "running"
            and run_row(conn, run_id)["state"] != "queued"
        ),
        what="run finished",
    )
    # The finish's commit is visible before the proxy has closed the connection in place
    # of its reply: wait for the drop, do not race it.
    assert proxy.dropped.wait(DEADLINE), "the proxy dropped the finish's reply"
    assert run_row(conn, run_id)["state"] == "succeeded"
    # The resent finish was answered as applied: logged as finished, never as a loss.
    worker.wait_for("run.finished", where=lambda r: r.get("run.id") == run_id)
    assert [r for r in worker.events("run.lease_lost") if r.get("run.id") == run_id] == []
    assert (
        conn.execute(
            "select count(*) from runlane.run_events where run_id = %s and event = 'run.finished'",
            (run_id,),
        ).fetchone()[0]
        == 1
    )


def test_outputs_an_agent_writes_concurrently_all_land(conn, workers_direct):
    """Numbered writes sent at once by one run (asyncio.gather of emits on a pool of
    connections) all land: a number is never overtaken by a higher one and then taken
    for a resend."""
    make_agent(conn, "agent-gather")
    run_id = submit(conn, "agent-gather", "thread-1", "write thirty things at once")
    workers_direct(
        "--agent", "gather_agent:agent", "--pool-size", "10", env={"GATHER_AGENT_OUTPUTS": "30"}
    )
    wait_until(lambda: run_row(conn, run_id)["state"] == "succeeded", what="run succeeded")
    bodies = [
        body
        for (body,) in conn.execute(
            "select body from runlane.run_outputs where run_id = %s", (run_id,)
        ).fetchall()
    ]
    assert sorted(bodies) == sorted(f"[{i}]" for i in range(30))
