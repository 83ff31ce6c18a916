"""Streamed outputs go to the database in batches: a worker writes the outputs all its
runs emitted within one --output-window in one append_outputs call (one commit), the
first visible output of an attempt at once, and each run's outputs stay exactly once
and in order, also when a batch's reply is lost, when one run of a batch is stopped,
and for readers that follow many streams from one process."""

from __future__ import annotations

import asyncio
from contextlib import aclosing

import psycopg
from emit_agent import token
from reply_dropping_proxy import ReplyDroppingProxy
from worker_helpers import (
    WorkerProcess,
    make_agent,
    run_row,
    submit,
    wait_until,
    workers,  # noqa: F401 - the fixture
)

import runlane

OUTPUTS = """
select output_id, attempt, kind, body, xmin::text::bigint as xid from runlane.run_outputs
where run_id = %s order by output_id
"""


def streaming_runs(conn: psycopg.Connection, count: int) -> list[int]:
    make_agent(conn, "agent-emit")
    return [submit(conn, "agent-emit", f"thread-{i}", "stream to me") for i in range(count)]


def succeeded(conn: psycopg.Connection, run_ids: list[int]) -> bool:
    return all(run_row(conn, r)["state"] == "succeeded" for r in run_ids)


def test_many_runs_stream_in_few_commits_each_output_once_in_order(conn, workers):  # noqa: F811
    runs = streaming_runs(conn, 8)
    workers(
        "--agent",
        "emit_agent:agent",
        "--output-window",
        "0.2",
        env={"EMIT_AGENT_TOKENS": "20", "EMIT_AGENT_GAP": "0.01"},
    )
    wait_until(lambda: succeeded(conn, runs), what="every run succeeded")
    xids: dict[int, set[int]] = {}
    rows = 0
    for run_id in runs:
        outputs = conn.execute(OUTPUTS, (run_id,)).fetchall()
        assert [body for _, _, _, body, _ in outputs] == [token(n) for n in range(20)]
        assert {attempt for _, attempt, _, _, _ in outputs} == {1}
        for *_, xid in outputs:
            xids.setdefault(xid, set()).add(run_id)
        rows += len(outputs)
    assert rows == 160
    # One commit per window for all runs, not one per output: far fewer commits than
    # rows, and commits that carry several runs' outputs.
    assert len(xids) < rows / 2, f"{len(xids)} commits for {rows} outputs"
    assert max(len(r) for r in xids.values()) >= 2


def test_the_first_visible_output_does_not_wait_for_the_window(conn, workers):  # noqa: F811
    """With a one-second window, the first token goes at once in a commit of its own; the
    second, emitted 0.3 s later, waits for the window. Had the first waited too, both
    would share a commit."""
    runs = streaming_runs(conn, 3)
    worker = workers(
        "--agent",
        "emit_agent:agent",
        "--output-window",
        "1",
        env={"EMIT_AGENT_TOKENS": "4", "EMIT_AGENT_FIRST_PAUSE": "0.3", "EMIT_AGENT_GAP": "0"},
    )
    wait_until(lambda: succeeded(conn, runs), what="every run succeeded")
    for run_id in runs:
        outputs = conn.execute(OUTPUTS, (run_id,)).fetchall()
        assert [body for _, _, _, body, _ in outputs] == [token(n) for n in range(4)]
        assert outputs[0][4] != outputs[1][4], "the first token waited for the window"
        firsts = worker.wait_for("run.first_response", where=lambda r, i=run_id: r["run.id"] == i)
        assert firsts["run.first_response_ms"] is not None


def test_an_emitted_output_of_an_unknown_kind_fails_the_attempt_and_writes_nothing(
    conn,
    workers,  # noqa: F811
):
    (run_id,) = streaming_runs(conn, 1)
    workers("--agent", "emit_agent:agent", env={"EMIT_AGENT_KIND": "shout"})
    wait_until(
        lambda: (run_row(conn, run_id)["last_error"] or "").startswith("ValueError"),
        what="the attempt failed",
    )
    assert "'shout'" in run_row(conn, run_id)["last_error"]
    assert (
        conn.execute(
            "select count(*) from runlane.run_outputs where run_id = %s", (run_id,)
        ).fetchone()[0]
        == 0
    )


def test_a_lost_reply_of_a_batch_writes_each_output_once(conn, db_dsn):
    runs = streaming_runs(conn, 4)
    proxy = ReplyDroppingProxy.for_dsn(db_dsn).start()
    worker = WorkerProcess(
        proxy.dsn(db_dsn),
        "--agent",
        "emit_agent:agent",
        "--lease",
        "30",
        "--output-window",
        "0.1",
        env={"EMIT_AGENT_TOKENS": "12", "EMIT_AGENT_GAP": "0.02"},
    )
    try:
        proxy.arm(b"append_outputs")  # the first batch: committed, its reply dropped
        wait_until(lambda: succeeded(conn, runs), what="every run succeeded")
        assert proxy.dropped.is_set(), "the proxy dropped a batch's reply"
        for run_id in runs:
            bodies = [body for _, _, _, body, _ in conn.execute(OUTPUTS, (run_id,)).fetchall()]
            assert bodies == [token(n) for n in range(12)], "each output once, in order"
            assert run_row(conn, run_id)["attempts"] == 1
        for run_id in runs:
            worker.wait_for("run.finished", where=lambda r, i=run_id: r.get("run.id") == i)
            firsts = [r for r in worker.events("run.first_response") if r.get("run.id") == run_id]
            assert len(firsts) == 1, firsts
        assert not worker.events("run.lease_lost")
    finally:
        worker.close()
        proxy.close()
        worker.check_logs()


def test_a_stopped_run_leaves_the_other_runs_of_its_batches_streaming(conn, workers):  # noqa: F811
    runs = streaming_runs(conn, 3)
    stopped = runs[1]
    workers(
        "--agent",
        "emit_agent:agent",
        "--output-window",
        "0.05",
        env={"EMIT_AGENT_TOKENS": "60", "EMIT_AGENT_GAP": "0.05"},
    )
    wait_until(
        lambda: (
            conn.execute(
                "select count(*) from runlane.run_outputs where run_id = %s", (stopped,)
            ).fetchone()[0]
            >= 3
        ),
        what="the run is streaming",
    )
    assert conn.execute("select runlane.cancel_run(%s)", (stopped,)).fetchone()[0] == "running"
    wait_until(lambda: run_row(conn, stopped)["state"] == "canceled", what="the stop took")
    wait_until(lambda: succeeded(conn, [runs[0], runs[2]]), what="the others succeeded")
    for run_id in (runs[0], runs[2]):
        bodies = [body for _, _, _, body, _ in conn.execute(OUTPUTS, (run_id,)).fetchall()]
        assert bodies == [token(n) for n in range(60)]
    stopped_at = run_row(conn, stopped)["finished_at"]
    later = conn.execute(
        "select count(*) from runlane.run_outputs where run_id = %s and created_at > %s",
        (stopped, stopped_at),
    ).fetchone()[0]
    assert later == 0, "nothing is written for a stopped run"


def test_streams_of_one_process_share_one_listening_connection(conn, db_dsn, workers):  # noqa: F811
    runs = streaming_runs(conn, 6)

    def listeners() -> int:
        return conn.execute(
            "select count(*) from pg_stat_activity where query = 'LISTEN runlane_outputs'"
        ).fetchone()[0]

    before = listeners()

    async def follow_all() -> tuple[list[list[str]], int]:
        async def follow(run_id: int) -> list[str]:
            async with aclosing(runlane.stream(db_dsn, run_id)) as outputs:
                return [o["body"] async for o in outputs]

        tasks = [asyncio.ensure_future(follow(r)) for r in runs]
        await asyncio.sleep(0)
        seen = await asyncio.to_thread(
            wait_until, lambda: listeners() > before, 30, "the streams listen"
        )
        del seen
        during = listeners()
        workers(
            "--agent",
            "emit_agent:agent",
            env={"EMIT_AGENT_TOKENS": "10", "EMIT_AGENT_GAP": "0.02"},
        )
        return list(await asyncio.gather(*tasks)), during

    bodies, during = asyncio.run(follow_all())
    assert during - before == 1, "six streams, one LISTEN connection"
    assert bodies == [[token(n) for n in range(10)]] * 6


def test_a_broken_shared_listener_fails_its_streams_and_the_next_stream_listens_again(conn, db_dsn):
    runs = streaming_runs(conn, 2)  # queued: no worker, the streams wait for hints

    async def scenario() -> tuple[list[BaseException | None], list[str]]:
        async def follow(run_id: int) -> BaseException | None:
            try:
                async with aclosing(runlane.stream(db_dsn, run_id, poll=30)) as outputs:
                    async for _ in outputs:
                        pass
            except psycopg.OperationalError as exc:
                return exc
            return None

        tasks = [asyncio.ensure_future(follow(r)) for r in runs]
        await asyncio.to_thread(
            wait_until,
            lambda: (
                conn.execute(
                    "select count(*) from pg_stat_activity where query = 'LISTEN runlane_outputs'"
                ).fetchone()[0]
                == 1
            ),
            30,
            "the streams listen",
        )
        conn.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity "
            "where query = 'LISTEN runlane_outputs'"
        )
        errors = list(await asyncio.gather(*tasks))
        # A new stream opens a fresh listener and follows its run to the end.
        conn.execute("select runlane.cancel_run(%s)", (runs[0],))  # queued: canceled at once
        async with aclosing(runlane.stream(db_dsn, runs[0], poll=0.2)) as outputs:
            after = [o["body"] async for o in outputs]
        return errors, after

    errors, after = asyncio.run(scenario())
    assert all(isinstance(e, psycopg.OperationalError) for e in errors), errors
    assert after == []
