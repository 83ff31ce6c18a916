"""The echo agent answers a thread of many messages of mixed lengths within the iteration
cap: its chunks follow the whole input, not its first message (a short first message
followed by long ones made 233 steps and failed the run as iteration_cap)."""

from __future__ import annotations

import random

import worker_helpers
from worker_helpers import MARKER, make_agent, wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after


def _bodies(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"m{i:03d} " + "x" * rng.choice([0, 1, 5, 40, 300, 2000]) for i in range(count)]


def test_a_thread_of_250_mixed_messages_is_answered_whole(conn, workers):
    make_agent(conn, "agent-many")
    first_batch, later_batch = _bodies(250, 1), _bodies(30, 2)
    # Queued before any worker runs: all 250 join one run (the first creates it).
    run_ids = set()
    for body in first_batch:
        _m, run_id, disposition = conn.execute(
            "select * from runlane.submit_message('agent-many', 'thread-many', %s)",
            (f"{body} {MARKER}",),
        ).fetchone()
        assert disposition in ("created", "steering")
        run_ids.add(run_id)
    (first_run,) = run_ids
    worker = workers("--no-maintenance", env={"RUNLANE_ECHO_DELAY": "0.2"})
    conn.execute("select runlane.publish_run(%s)", (first_run,))
    worker.wait_for("run.first_response", where=lambda r: r["run.id"] == first_run)
    # While it runs: these are held, then answered by the follow-up run its finish makes.
    for body in later_batch:
        conn.execute(
            "select * from runlane.submit_message('agent-many', 'thread-many', %s)",
            (f"{body} {MARKER}",),
        )

    def all_answered() -> bool:
        return conn.execute(
            "select count(*) = 0 from runlane.messages as m "
            "left join runlane.runs as r on r.run_id = m.run_id "
            "where m.thread_id = 'thread-many' and r.state is distinct from 'succeeded'"
        ).fetchone()[0]

    wait_until(all_answered, what="every message attached to a succeeded run")
    runs = conn.execute(
        "select run_id, state, reason from runlane.runs where thread_id = 'thread-many' "
        "order by run_id"
    ).fetchall()
    assert runs[0] == (first_run, "succeeded", None)
    assert [state for _r, state, _reason in runs] == ["succeeded"] * len(runs)
    for run_id, _state, _reason in runs:
        said = "".join(
            body
            for (body,) in conn.execute(
                "select body from runlane.run_outputs where run_id = %s and kind = 'text' "
                "order by output_id",
                (run_id,),
            ).fetchall()
        )
        heard = "\n".join(
            body
            for (body,) in conn.execute(
                "select body from runlane.messages where run_id = %s order by message_id", (run_id,)
            ).fetchall()
        )
        assert said == heard, f"run {run_id} echoed its messages whole, in order"
    answered = conn.execute(
        "select count(*) from runlane.messages where thread_id = 'thread-many'"
    ).fetchone()[0]
    assert answered == len(first_batch) + len(later_batch)
