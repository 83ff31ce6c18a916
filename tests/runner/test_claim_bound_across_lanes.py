"""The per-worker organization bound (runlane.max_per_org) holds across a worker's lanes.

A worker's interactive and background lanes claim on separate connections. Each claim
counts the runs the worker holds, and cannot see another lane's claim before it commits:
two lanes claiming at once could each fill an organization's room. A keyed claim under the
bound therefore locks the worker's bound row first, so one lane's claim waits for the
other's to commit and counts what it took.
"""

from __future__ import annotations

import threading
import uuid

import psycopg

CLAIM = """
select run_id
from runlane.claim_runs(p_worker => %(worker)s::text, p_lanes => array[%(lane)s::text],
                        p_limit => %(limit)s::int, p_lease => interval '60 s',
                        p_claim_key => %(key)s::uuid, p_report_skipped => false)
"""
HELD = """
select org_id, count(*)
from runlane.runs
where lease_owner = %s and state = 'running'
group by org_id
"""


def queue_both_lanes(conn: psycopg.Connection, org: str, runs: int) -> None:
    """`runs` queued chat runs and `runs` queued background runs of organization `org`
    (cap 1000), each background run of its own agent (one unfinished background run per
    agent)."""
    conn.execute("select runlane_test.org(%s, 1000)", (org,))
    conn.execute(
        """
        select runlane_test.agent(%(org)s || '-agent-' || g, %(org)s)
        from generate_series(1, %(runs)s) as g
        """,
        {"org": org, "runs": runs},
    )
    conn.execute(
        """
        insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model)
        select %(org)s, %(org)s || '-agent-' || g, l.lane,
               case l.lane when 'interactive' then 'interactive' else 'scheduled' end,
               case l.lane when 'interactive' then %(org)s || '-thread-' || g end,
               'x', 'test-model'
        from generate_series(1, %(runs)s) as g
        cross join (values ('interactive'), ('background')) as l (lane)
        order by g, l.lane
        """,
        {"org": org, "runs": runs},
    )
    conn.commit()


def lane_connection(db_dsn: str, bound: int, autocommit: bool) -> psycopg.Connection:
    lane = psycopg.connect(db_dsn, autocommit=autocommit)
    lane.execute("select set_config('runlane.max_per_org', %s, false)", (str(bound),))
    if not autocommit:
        lane.commit()
    return lane


def claim(lane: psycopg.Connection, worker: str, lane_name: str, limit: int) -> list[int]:
    return [
        r[0]
        for r in lane.execute(
            CLAIM, {"worker": worker, "lane": lane_name, "limit": limit, "key": uuid.uuid4()}
        )
    ]


def test_a_lane_waits_for_the_other_lanes_claim_and_counts_it(conn, db_dsn):
    queue_both_lanes(conn, "org-lanes", 20)
    with (
        lane_connection(db_dsn, 5, autocommit=False) as background,
        lane_connection(db_dsn, 5, autocommit=True) as interactive,
    ):
        # The background lane's claim fills the room of 5, its transaction still open.
        assert len(claim(background, "w1", "background", 5)) == 5

        taken: list[list[int]] = []
        chat = threading.Thread(
            target=lambda: taken.append(claim(interactive, "w1", "interactive", 5))
        )
        chat.start()
        chat.join(0.5)
        assert chat.is_alive(), "the chat lane's claim went ahead of the open claim"

        background.commit()
        chat.join(30)
        assert not chat.is_alive()

    assert taken == [[]], "the chat lane counted the background lane's 5 runs: no room"
    assert dict(conn.execute(HELD, ("w1",)).fetchall()) == {"org-lanes": 5}


def test_many_lanes_claiming_at_once_never_exceed_the_bound(conn, db_dsn):
    bound, workers, rounds = 4, 4, 12
    queue_both_lanes(conn, "org-x", 200)
    queue_both_lanes(conn, "org-y", 200)
    lanes = [
        (f"w{w}", lane_name, lane_connection(db_dsn, bound, autocommit=True))
        for w in range(workers)
        for lane_name in ("interactive", "background")
    ]
    errors: list[BaseException] = []
    try:
        for _ in range(rounds):
            start = threading.Barrier(len(lanes))

            def run(
                worker: str,
                lane_name: str,
                lane: psycopg.Connection,
                start: threading.Barrier = start,
            ) -> None:
                try:
                    start.wait()
                    for _ in range(3):
                        claim(lane, worker, lane_name, 3)
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)

            threads = [threading.Thread(target=run, args=lane) for lane in lanes]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert not errors, errors
            for w in range(workers):
                held = dict(conn.execute(HELD, (f"w{w}",)).fetchall())
                assert held and max(held.values()) <= bound, (f"w{w}", held)
            conn.rollback()
            # The round's runs end (as their finish would), and the next round claims anew.
            conn.execute(
                """
                update runlane.runs
                set state = 'succeeded', finished_at = now(), lease_owner = null,
                    lease_expires_at = null
                where state = 'running'
                """
            )
            conn.commit()
    finally:
        for _, _, lane in lanes:
            lane.close()
