"""The worker's per-organization bound is work-conserving: it binds only while an
organization within its room has runs waiting.

runlane.max_per_org_mode = work_conserving (what `runlane worker` sets on its claim
connections unless --max-per-org-strict): a claim takes the runs of organizations within
their room on the worker first, and when the page still has room, reads on past the bound.
A lone organization is limited by the pages memory admission lets the worker ask for,
never by the bound; a session that does not set the mode keeps the strict bound
(test_claim_bound.py, test_claim_bound_across_lanes.py).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest
import worker_helpers
from worker_helpers import wait_until
from worker_parts import queue_chat_runs

from runlane.worker.config import WorkerConfig

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

CLAIM = """
select run_id, org_id
from runlane.claim_runs(p_worker => %(worker)s::text, p_lanes => array['interactive'],
                        p_limit => %(limit)s::int)
"""


def claimer(db_dsn: str, bound: int, mode: str = "work_conserving") -> psycopg.Connection:
    conn = psycopg.connect(db_dsn, autocommit=True)
    conn.execute(
        "select set_config('runlane.max_per_org', %s, false), "
        "set_config('runlane.max_per_org_mode', %s, false)",
        (str(bound), mode),
    )
    return conn


def held(conn: psycopg.Connection, worker: str) -> dict[str, int]:
    return dict(
        conn.execute(
            "select org_id, count(*) from runlane.runs "
            "where lease_owner = %s and state = 'running' "
            "group by org_id",
            (worker,),
        ).fetchall()
    )


def test_a_lone_organization_is_claimed_past_the_bound(conn, db_dsn):
    queue_chat_runs(conn, "org-a", "a-1", 40)
    conn.commit()
    with claimer(db_dsn, 5) as mine:
        # A backlog (the fair path): every page full, past the bound.
        for _ in range(3):
            assert len(mine.execute(CLAIM, {"worker": "w1", "limit": 10}).fetchall()) == 10
        # Ten left, all fitting in the page (the idle statement): all of them.
        assert len(mine.execute(CLAIM, {"worker": "w1", "limit": 10}).fetchall()) == 10
    assert held(conn, "w1") == {"org-a": 40}


def test_while_an_organization_within_its_room_waits_it_comes_first(conn, db_dsn):
    queue_chat_runs(conn, "org-a", "a-1", 40)
    conn.commit()
    with claimer(db_dsn, 5) as mine:
        assert len(mine.execute(CLAIM, {"worker": "w1", "limit": 10}).fetchall()) == 10
        b_runs = queue_chat_runs(conn, "org-b", "b-1", 20)
        conn.commit()
        # org-a is over its bound, org-b within its room (5): org-b's five come first,
        # then the page is filled past the bound, round robin.
        claimed = mine.execute(CLAIM, {"worker": "w1", "limit": 8}).fetchall()
        assert [org for _, org in claimed[:5]] == ["org-b"] * 5
        assert [run for run, _ in claimed[:5]] == b_runs[:5]
        assert len(claimed) == 8
        # A page no larger than org-b's room: org-b alone.
        conn.execute(
            "update runlane.runs set state = 'succeeded', finished_at = now(), "
            "lease_owner = null, lease_expires_at = null where org_id = 'org-b' "
            "and state = 'running'"
        )
        conn.commit()
        claimed = mine.execute(CLAIM, {"worker": "w1", "limit": 5}).fetchall()
        assert [org for _, org in claimed] == ["org-b"] * 5


def test_a_strict_session_still_holds_a_lone_organization(conn, db_dsn):
    queue_chat_runs(conn, "org-a", "a-1", 40)
    conn.commit()
    with claimer(db_dsn, 5, "strict") as mine:
        assert len(mine.execute(CLAIM, {"worker": "w1", "limit": 10}).fetchall()) == 5
        assert mine.execute(CLAIM, {"worker": "w1", "limit": 10}).fetchall() == []
    with claimer(db_dsn, 5, "lots") as mine, pytest.raises(psycopg.Error) as err:
        mine.execute(CLAIM, {"worker": "w1", "limit": 10})
    assert err.value.sqlstate == "22023"


def test_a_worker_with_default_settings_runs_more_than_the_bound_of_one_organization(
    conn, workers, tmp_path: Path
):
    bound = WorkerConfig.max_per_org  # the worker's default, in force below
    runs = queue_chat_runs(conn, "org-a", "a-1", bound + 20)
    conn.commit()
    gate = tmp_path / f"gate-{uuid.uuid4().hex}"
    worker = workers(
        "--agent", "gate_agent:agent", "--no-maintenance", env={"GATE_AGENT_FILE": str(gate)}
    )

    def all_running() -> bool:
        running = held(conn, worker.worker_id).get("org-a", 0)
        conn.commit()
        return running == len(runs)

    wait_until(
        all_running,
        timeout=120,
        what=f"all {len(runs)} runs of one organization running at once (bound {bound})",
    )
    gate.touch()

    def all_done() -> bool:
        done = conn.execute(
            "select count(*) from runlane.runs where run_id = any(%s) and state = 'succeeded'",
            (runs,),
        ).fetchone()[0]
        conn.commit()
        return done == len(runs)

    wait_until(all_done, timeout=120, what="every run finished")
