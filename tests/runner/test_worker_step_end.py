"""A step's end is one statement: its outputs in order, then the finish or checkpoint,
in one transaction — fenced as a whole, and all or nothing."""

from __future__ import annotations

import psycopg
import pytest

from runlane.worker import CHECKPOINT_WITH_OUTPUTS, FINISH_WITH_OUTPUTS, outputs_params


def claimed_run(conn) -> tuple[int, int]:
    conn.execute("select runlane_test.agent('agent-s')")
    run_id = conn.execute(
        "select runlane_test.queued_run('agent-s', 'interactive', 'interactive')"
    ).fetchone()[0]
    fence = conn.execute("select runlane_test.claimed(%s)", (run_id,)).fetchone()[0]
    return run_id, fence


def finish(conn, run_id: int, fence: int, outputs) -> tuple:
    return conn.execute(
        FINISH_WITH_OUTPUTS,
        {
            "run_id": run_id,
            "fence": fence,
            "outcome": "succeeded",
            "error": None,
            "cost": 0,
            "seq": 1,
            "last_seq": len(outputs) + 1,
            **outputs_params(outputs),
        },
    ).fetchone()


def test_outputs_are_written_in_order_in_the_finishing_transaction(conn):
    run_id, fence = claimed_run(conn)
    outputs = (("progress", "thinking"), ("text", "first"), ("card", "second"), ("text", "third"))
    first_response, timing = finish(conn, run_id, fence, outputs)
    rows = conn.execute(
        "select kind, body, xmin::text from runlane.run_outputs "
        "where run_id = %s order by output_id",
        (run_id,),
    ).fetchall()
    assert [(k, b) for k, b, _ in rows] == list(outputs)
    state, run_xmin = conn.execute(
        "select state, xmin::text from runlane.runs where run_id = %s", (run_id,)
    ).fetchone()
    assert state == "succeeded"
    assert {x for _, _, x in rows} == {run_xmin}, "outputs and finish share one transaction"
    assert first_response["event"] == "run.first_response"
    assert timing["event"] == "run.finished"


def test_a_fenced_out_step_end_writes_nothing(conn):
    run_id, fence = claimed_run(conn)
    with pytest.raises(psycopg.Error) as refused:
        finish(conn, run_id, fence - 1, (("text", "too late"),))
    assert refused.value.sqlstate == "RL001"
    assert (
        conn.execute(
            "select count(*) from runlane.run_outputs where run_id = %s", (run_id,)
        ).fetchone()[0]
        == 0
    )
    assert conn.execute(
        "select state, first_response_at from runlane.runs where run_id = %s", (run_id,)
    ).fetchone() == ("running", None)


def test_a_bad_output_kind_rolls_back_the_whole_step(conn):
    run_id, fence = claimed_run(conn)
    with pytest.raises(psycopg.Error) as refused:
        conn.execute(
            CHECKPOINT_WITH_OUTPUTS,
            {
                "run_id": run_id,
                "fence": fence,
                "checkpoint": '{"step": 1}',
                "seq": 1,
                "last_seq": 3,
                **outputs_params((("text", "kept?"), ("shout", "no such kind"))),
            },
        )
    assert refused.value.sqlstate == "22023"
    assert (
        conn.execute(
            "select count(*) from runlane.run_outputs where run_id = %s", (run_id,)
        ).fetchone()[0]
        == 0
    )
    assert conn.execute(
        "select checkpoint, first_response_at from runlane.runs where run_id = %s", (run_id,)
    ).fetchone() == (None, None)
