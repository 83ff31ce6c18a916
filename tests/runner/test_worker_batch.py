"""The worker's batched calls: a claimed batch's messages in one read (run_messages_many)
and the finishes of runs ending together in one finish_runs call. Each run must come out
exactly as if it had been finished alone: its own outputs, byte for byte, one finish."""

from __future__ import annotations

from decimal import Decimal

import worker_helpers
from worker_helpers import MARKER, claimed_chat_run, make_agent, submit, wait_until

from runlane.worker import FINISH_RUNS, RUN_MESSAGES_MANY, pg_array

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

TRICKY = [
    'say "hi"',
    'back\\slash \\"',
    "{braces, commas}",
    "NULL",
    "",
    "é ü 漢字\nnew line",
    "tab\there",
    "'single'",
]


def test_array_literals_carry_any_text_and_cost_exactly_through_finish_runs(conn):
    runs = [claimed_chat_run(conn, make_agent(conn, f"agent-b{i}")) for i in range(3)]
    costs = [0.0001, 0, 1.5]
    bodies = [TRICKY[:4], TRICKY[4:], []]
    params = {
        "run_ids": [r for r, _ in runs],
        "fences": [f for _, f in runs],
        "outcomes": ["succeeded", "failed", "succeeded"],
        "errors": [None, 'a "quoted" error', None],
        "costs": costs,
        "counts": [len(b) for b in bodies],
        "kinds": ["text" for b in bodies for _ in b],
        "bodies": [x for b in bodies for x in b],
        "seqs": [1, 1, 1],
    }
    rows = conn.execute(FINISH_RUNS, {k: pg_array(v) for k, v in params.items()}).fetchall()
    assert [(r[0], r[1], r[4]) for r in rows] == [(r, True, None) for r, _ in runs]
    for (run_id, _), want in zip(runs, bodies, strict=True):
        got = conn.execute(
            "select body from runlane.run_outputs where run_id = %s order by output_id", (run_id,)
        ).fetchall()
        assert [b for (b,) in got] == want
    finished = conn.execute(
        "select state, cost, last_error from runlane.runs where run_id = any(%s) order by run_id",
        ([r for r, _ in runs],),
    ).fetchall()
    assert finished == [
        ("succeeded", Decimal("0.0001"), None),
        ("failed", Decimal("0"), 'a "quoted" error'),
        ("succeeded", Decimal("1.5"), None),
    ]


def test_a_batch_read_returns_each_owned_runs_messages_and_nothing_of_a_lost_one(conn):
    mine = claimed_chat_run(conn, make_agent(conn, "agent-m1"), text=TRICKY[1])
    lost = claimed_chat_run(conn, make_agent(conn, "agent-m2"), text="taken over")
    conn.execute("select runlane_test.claimed(%s)", (lost[0],))  # another owner now
    rows = conn.execute(
        RUN_MESSAGES_MANY,
        {"run_ids": pg_array([mine[0], lost[0]]), "fences": pg_array([mine[1], lost[1]])},
    ).fetchall()
    assert [(r[0], r[2].startswith(TRICKY[1])) for r in rows] == [(mine[0], True)]


def test_a_worker_finishing_many_runs_together_gives_each_its_own_reply(conn, workers):
    agents = [make_agent(conn, f"agent-w{i}") for i in range(8)]
    texts = {}
    for n in range(40):
        text = f"{TRICKY[n % len(TRICKY)]} #{n}"
        texts[submit(conn, agents[n % len(agents)], f"thread-{n}", text, publish=False)] = text
    worker = workers("--agent", "runlane.agents.echo:agent", env={"RUNLANE_ECHO_CHUNKS": "1"})
    wait_until(
        lambda: conn.execute(
            "select count(*) = %s from runlane.runs where run_id = any(%s) and state = 'succeeded'",
            (len(texts), list(texts)),
        ).fetchone()[0],
        what="all runs succeeded",
    )
    for run_id, text in texts.items():
        replies = conn.execute(
            "select body from runlane.run_outputs where run_id = %s", (run_id,)
        ).fetchall()
        assert [b for (b,) in replies] == [f"{text} {MARKER}"]
    wait_until(lambda: len(worker.events("run.finished")) >= len(texts), what="logs")
    finished = [r["run.id"] for r in worker.events("run.finished")]
    responded = [r["run.id"] for r in worker.events("run.first_response")]
    assert sorted(finished) == sorted(texts) == sorted(responded)


def test_array_literals_of_whole_numbers_and_of_mixed_values_read_back_as_sent(conn):
    # whole numbers take a shorter path than text, floats, nulls and booleans
    ints = [0, -1, 7, 2**62, -(2**63)]
    assert conn.execute("select %s::bigint[]", (pg_array(ints),)).fetchone()[0] == ints
    assert conn.execute("select %s::bigint[]", (pg_array([]),)).fetchone()[0] == []
    assert conn.execute("select %s::bigint[]", (pg_array([1, None, 3]),)).fetchone()[0] == [
        1,
        None,
        3,
    ]
    assert conn.execute("select %s::text[]", (pg_array([1, "a b", None]),)).fetchone()[0] == [
        "1",
        "a b",
        None,
    ]
    assert conn.execute("select %s::text[]", (pg_array(TRICKY),)).fetchone()[0] == TRICKY
    assert conn.execute("select %s::numeric[]", (pg_array([1, 0.5]),)).fetchone()[0] == [
        Decimal(1),
        Decimal("0.5"),
    ]
