"""runlane.worker.finisher against a real PostgreSQL: runs ending together are finished
by one finish_runs call, each run on its own (a fenced-out run is lost alone); a failed
attempt goes to retry_run; a release hands the run back; a stopped run closes canceled."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from worker_helpers import make_agent, run_state, submit
from worker_parts import RecordingDatabase, Timings, claim, config, database

from runlane.agents import StepResult
from runlane.worker.finisher import (
    FINISH_RUN,
    FINISH_RUNS,
    FINISH_WITH_OUTPUTS,
    RELEASE_RUN,
    RETRY_RUN,
    Finisher,
)
from runlane.worker.run_handle import RunHandle


def _claimed(conn: psycopg.Connection, n: int) -> list[dict[str, Any]]:
    for i in range(n):
        agent_id = make_agent(conn, f"agent-f{i}")
        submit(conn, agent_id, f"thread-{i}", f"question {i}")
    rows = claim(conn, limit=n)
    assert len(rows) == n
    return rows


def _replies(conn: psycopg.Connection, run_ids: list[int]) -> dict[int, list[str]]:
    rows = conn.execute(
        "select run_id, body from runlane.run_outputs where run_id = any(%s) order by output_id",
        (run_ids,),
    ).fetchall()
    found: dict[int, list[str]] = {}
    for run_id, body in rows:
        found.setdefault(run_id, []).append(body)
    return found


def _finish_all(db_dsn: str, rows: list[dict[str, Any]], before=None, **options: Any):
    """Finishes every run at once (as runs ending in the same loop iteration do); returns
    the handles, the statements sent and the timing events."""
    timings = Timings()

    async def scenario():
        async with database(db_dsn) as db:
            finisher = Finisher(config(db_dsn, **options), db, timings, asyncio.create_task)
            runs = [RunHandle(row, db, timings) for row in rows]
            await asyncio.gather(
                *(
                    finisher.finish(
                        run, StepResult(done=True, outputs=(("text", f"reply {run.run_id}"),))
                    )
                    for run in runs
                )
            )
            return runs, db.sent

    runs, sent = asyncio.run(scenario())
    return runs, sent, timings


def test_runs_ending_together_are_finished_by_one_finish_runs_call(conn, db_dsn):
    rows = _claimed(conn, 10)
    runs, sent, timings = _finish_all(db_dsn, rows, finish_batch=50)
    assert [sql for _, sql, _ in sent] == [FINISH_RUNS]
    ids = [r.run_id for r in runs]
    assert all(run_state(conn, run_id) == "succeeded" for run_id in ids)
    assert _replies(conn, ids) == {run_id: [f"reply {run_id}"] for run_id in ids}
    assert timings.events().count("run.finished") == 10
    assert timings.events().count("run.first_response") == 10


def test_a_batch_holds_at_most_finish_batch_runs(conn, db_dsn):
    rows = _claimed(conn, 7)
    runs, sent, _ = _finish_all(db_dsn, rows, finish_batch=3)
    sizes = sorted(params["run_ids"].count(",") + 1 for _, _, params in sent)
    assert sizes == [1, 3, 3]
    assert all(run_state(conn, r.run_id) == "succeeded" for r in runs)


def test_a_fenced_out_run_in_a_batch_is_lost_alone(conn, db_dsn):
    rows = _claimed(conn, 3)
    taken = rows[1]["run_id"]
    conn.execute("select runlane_test.claimed(%s, 'another-worker')", (taken,))
    runs, sent, timings = _finish_all(db_dsn, rows, finish_batch=50)
    assert [sql for _, sql, _ in sent] == [FINISH_RUNS]  # no second try for the lost run
    assert [(r.run_id, r.lost, r.lost_why) for r in runs] == [
        (rows[0]["run_id"], False, ""),
        (taken, True, "fenced_out"),
        (rows[2]["run_id"], False, ""),
    ]
    assert [run_state(conn, r.run_id) for r in runs] == ["succeeded", "running", "succeeded"]
    assert taken not in _replies(conn, [r.run_id for r in runs])
    assert timings.events().count("run.finished") == 2


def test_a_batch_over_sixty_that_cannot_finish_together_goes_again_in_parts(conn, db_dsn):
    """finish_runs goes run by run at most 60 runs a call (one subtransaction each): a
    longer batch with a fenced-out run is refused whole, then sent again in halves."""
    rows = _claimed(conn, 70)
    taken = rows[7]["run_id"]
    conn.execute("select runlane_test.claimed(%s, 'another-worker')", (taken,))
    runs, sent, timings = _finish_all(db_dsn, rows, finish_batch=100)
    sizes = [params["run_ids"].count(",") + 1 for _, _, params in sent]
    assert [sql for _, sql, _ in sent] == [FINISH_RUNS] * 3
    assert sizes == [70, 35, 35]
    assert [(r.run_id, r.lost) for r in runs if r.lost] == [(taken, True)]
    others = [r.run_id for r in runs if r.run_id != taken]
    assert all(run_state(conn, run_id) == "succeeded" for run_id in others)
    assert _replies(conn, others) == {run_id: [f"reply {run_id}"] for run_id in others}
    assert timings.events().count("run.finished") == 69


def test_a_lost_reply_of_a_batch_over_sixty_is_answered_as_applied(conn, db_dsn, monkeypatch):
    """The first finish_runs call commits and its reply is lost; the resend cannot finish
    together (its runs are finished already), so it is refused whole and goes again in
    halves, with the same write numbers: each half is answered as applied, never RL001."""
    rows = _claimed(conn, 70)
    send = RecordingDatabase.call

    async def reply_lost_once(db, lane, sql, params=None, fetch="one", retries=None, orgs=()):
        if sql == FINISH_RUNS and db.count(FINISH_RUNS) == 0:
            await send(db, lane, sql, params, fetch, retries, orgs)  # committed, reply lost
        return await send(db, lane, sql, params, fetch, retries, orgs)  # the resend

    monkeypatch.setattr(RecordingDatabase, "call", reply_lost_once)
    runs, sent, timings = _finish_all(db_dsn, rows, finish_batch=100)
    sizes = [params["run_ids"].count(",") + 1 for _, _, params in sent]
    assert sizes == [70, 70, 35, 35]
    assert not [r.run_id for r in runs if r.lost]
    ids = [r.run_id for r in runs]
    assert all(run_state(conn, run_id) == "succeeded" for run_id in ids)
    assert _replies(conn, ids) == {run_id: [f"reply {run_id}"] for run_id in ids}
    assert timings.events().count("run.finished") == 70


def test_a_batch_of_one_finishes_each_run_alone_with_its_outputs(conn, db_dsn):
    rows = _claimed(conn, 2)
    runs, sent, _ = _finish_all(db_dsn, rows, finish_batch=1)
    assert [sql for _, sql, _ in sent] == [FINISH_WITH_OUTPUTS, FINISH_WITH_OUTPUTS]
    ids = [r.run_id for r in runs]
    assert _replies(conn, ids) == {run_id: [f"reply {run_id}"] for run_id in ids}


def _one(db_dsn: str, row: dict[str, Any], act) -> tuple[RunHandle, list, Timings]:
    timings = Timings()

    async def scenario():
        async with database(db_dsn) as db:
            finisher = Finisher(config(db_dsn), db, timings, asyncio.create_task)
            run = RunHandle(row, db, timings)
            await act(finisher, run)
            return run, db.sent

    run, sent = asyncio.run(scenario())
    return run, sent, timings


def test_a_failed_attempt_is_handed_to_retry_run_with_its_error(conn, db_dsn):
    (row,) = _claimed(conn, 1)
    run, sent, _ = _one(db_dsn, row, lambda f, r: f.retry(r, ValueError("model said no")))
    assert [sql for _, sql, _ in sent] == [RETRY_RUN]
    state, reason, error, waits = conn.execute(
        "select state, reason, last_error, wake_at > now() from runlane.runs where run_id = %s",
        (row["run_id"],),
    ).fetchone()
    assert (state, reason, waits) == ("queued", "retry_scheduled", True)
    assert error.startswith("ValueError")


def test_a_release_hands_the_run_back_to_the_queue(conn, db_dsn):
    (row,) = _claimed(conn, 1)
    run, sent, _ = _one(db_dsn, row, lambda f, r: f.release(r))
    assert [sql for _, sql, _ in sent] == [RELEASE_RUN]
    assert run_state(conn, row["run_id"]) == "queued"


def test_a_stopped_run_still_owned_is_closed_canceled(conn, db_dsn):
    (row,) = _claimed(conn, 1)
    assert (
        conn.execute("select runlane.cancel_run(%s)", (row["run_id"],)).fetchone()[0] == "running"
    )

    async def end(finisher: Finisher, run: RunHandle) -> None:
        run.lose("stop_requested")
        await finisher.end_lost(run)

    _, sent, timings = _one(db_dsn, row, end)
    assert [sql for _, sql, _ in sent] == [FINISH_RUN]
    assert conn.execute(
        "select state, reason from runlane.runs where run_id = %s", (row["run_id"],)
    ).fetchone() == ("canceled", "canceled")
    assert timings.events() == ["run.finished"]


def test_a_lost_run_owned_by_another_is_left_alone(conn, db_dsn):
    (row,) = _claimed(conn, 1)
    conn.execute("select runlane_test.claimed(%s, 'another-worker')", (row["run_id"],))

    async def end(finisher: Finisher, run: RunHandle) -> None:
        run.lose("heartbeat_refused")
        await finisher.end_lost(run)

    _, _, timings = _one(db_dsn, row, end)
    assert conn.execute(
        "select state, lease_owner from runlane.runs where run_id = %s", (row["run_id"],)
    ).fetchone() == ("running", "another-worker")
    assert timings.events() == []
