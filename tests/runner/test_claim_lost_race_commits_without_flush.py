"""A claim that lost its runs to another claim commits without waiting for a WAL flush.

One notification wakes every idle worker of a lane. The claims that arrive while the
winner's claim is still open see its run queued, lock their receipt (a resend racing its
original must wait for it), find the run taken and commit. Waiting for a flush of its
own, beside the winner's, each would cost the disk a flush (with 8 idle workers, 4.7
flushes per message instead of the 2.8 of one worker). Such a claim holds row
locks only, so on a session that says each of its claims is a transaction of its own
(runlane.autocommit_claims = on, as the worker's claim connections do) claim_runs turns
synchronous_commit off for that transaction. Checked where it shows: the setting inside
the claim's transaction, right after the call. A claim that took a run, and any session
that did not opt in, keeps synchronous_commit on. And proven where it matters: a real
crash that loses the loser's commit loses nothing else.
"""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest
from worker_helpers import first_chat_run, wait_until_blocked
from worker_parts import claim_connection, queue_chat_runs, worker_claim

from runlane.pgcluster import LocalCluster
from runlane.worker.dispatcher import CLAIM


def _durable(db_dsn: str) -> psycopg.Connection:
    """A client's connection whose commits wait for their flush (the test cluster's
    default is not to: it runs with synchronous_commit off)."""
    conn = psycopg.connect(db_dsn, autocommit=True)
    conn.execute("set synchronous_commit = on")
    return conn


def _worker(dsn: str) -> psycopg.Connection:
    """The worker's claim connection, its commits waiting for their flush unless the claim
    says otherwise (what this file checks)."""
    return claim_connection(dsn, durable=True)


def _commit_mode_after(conn: psycopg.Connection, params: dict) -> tuple[list[int], bool, str]:
    """The claim in a transaction of its own: (run ids taken, whether it wrote (was given
    a transaction id), synchronous_commit as its commit will see it)."""
    with conn.transaction():
        taken = [r[0] for r in conn.execute(CLAIM, params).fetchall()]
        wrote, mode = conn.execute(
            "select txid_current_if_assigned() is not null, current_setting('synchronous_commit')"
        ).fetchone()
    return taken, wrote, mode


def _background_runs(conn: psycopg.Connection, org: str, cap: int, runs: int) -> list[int]:
    """`runs` queued background runs of an organization with a cap of `cap`, each of its
    own agent (an agent has one unfinished background run at most); oldest first."""
    conn.execute("select runlane_test.org(%s, %s)", (org, cap))
    ids = []
    for i in range(runs):
        conn.execute("select runlane_test.agent(%s, %s)", (f"agent-{org}-{i}", org))
        ids.append(
            conn.execute(
                "select runlane_test.queued_run(%s, 'background')", (f"agent-{org}-{i}",)
            ).fetchone()[0]
        )
    return ids


@pytest.mark.parametrize("lane", ["interactive", "background"])
def test_a_worker_that_lost_the_run_to_another_commits_without_waiting_for_a_flush(
    conn, db_dsn, lane
):
    if lane == "interactive":
        [run_id] = queue_chat_runs(conn, "org-a", "a-1", 1)
    else:
        [run_id] = _background_runs(conn, "org-a", 4, 1)
    with _worker(db_dsn) as winner, _worker(db_dsn) as loser:
        winner.execute("begin")
        assert [r[0] for r in winner.execute(CLAIM, worker_claim("w-winner", lane))] == [run_id]
        # the winner has not committed: the loser sees the run queued, and it is locked
        taken, wrote, mode = _commit_mode_after(loser, worker_claim("w-loser", lane))
        assert (taken, wrote) == ([], True), "the race was not run: the loser wrote nothing"
        assert mode == "off"
        # the winner's claim waits for its flush, as every claim that took a run does
        assert winner.execute("select current_setting('synchronous_commit')").fetchone()[0] == "on"
        winner.execute("commit")
    assert conn.execute(
        "select state, lease_owner from runlane.runs where run_id = %s", (run_id,)
    ).fetchone() == ("running", "w-winner")


def test_a_claim_its_organizations_cap_left_empty_commits_without_waiting_for_a_flush(conn, db_dsn):
    first, second = _background_runs(conn, "org-capped", 1, 2)
    with _worker(db_dsn) as winner, _worker(db_dsn) as loser:
        winner.execute("begin")
        # (one run: the winner locks only the first, so the loser can lock the second)
        assert [r[0] for r in winner.execute(CLAIM, worker_claim("w-winner", "background", 1))] == [
            first
        ]
        loser.execute("set statement_timeout = '20s'")
        pid = loser.execute("select pg_backend_pid()").fetchone()[0]
        result: dict[str, tuple] = {}

        def claim() -> None:
            # the loser locks the second run, then waits for the organization's lock
            result["claim"] = _commit_mode_after(loser, worker_claim("w-loser", "background"))

        thread = threading.Thread(target=claim)
        thread.start()
        wait_until_blocked(conn, pid)  # on the organization's lock
        winner.execute("commit")  # now the organization is at its cap of 1
        thread.join(20)
    assert result["claim"] == ([], True, "off")
    assert (
        conn.execute("select state from runlane.runs where run_id = %s", (second,)).fetchone()[0]
        == "queued"
    )


def test_a_session_that_did_not_say_its_claims_stand_alone_keeps_its_durability(conn, db_dsn):
    [run_id] = queue_chat_runs(conn, "org-a", "a-1", 1)
    with _worker(db_dsn) as winner, _durable(db_dsn) as caller:
        winner.execute("begin")
        assert [r[0] for r in winner.execute(CLAIM, worker_claim("w-winner"))] == [run_id]
        # a client's own transaction, which may write more after its claim
        assert _commit_mode_after(caller, worker_claim("w-client")) == ([], True, "on")
        caller.execute("set runlane.autocommit_claims = off")
        assert _commit_mode_after(caller, worker_claim("w-client")) == ([], True, "on")
        winner.execute("commit")


def test_a_malformed_setting_is_refused_and_loses_nothing(conn, db_dsn):
    [run_id] = queue_chat_runs(conn, "org-a", "a-1", 1)
    with _worker(db_dsn) as winner, _durable(db_dsn) as caller:
        winner.execute("begin")
        assert [r[0] for r in winner.execute(CLAIM, worker_claim("w-winner"))] == [run_id]
        caller.execute("set runlane.autocommit_claims = 'yes please'")
        with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
            caller.execute(CLAIM, worker_claim("w-client"))
        assert "runlane.autocommit_claims must be on or off" in str(refused.value)
        assert "'yes please'" in str(refused.value)
        winner.execute("commit")
    assert conn.execute(
        "select state, lease_owner from runlane.runs where run_id = %s", (run_id,)
    ).fetchone() == ("running", "w-winner")
    assert (
        conn.execute(
            "select count(*) from runlane.claim_receipts where worker_id = 'w-client'"
        ).fetchone()[0]
        == 0
    )


def test_a_crash_that_loses_the_losers_commit_loses_nothing():
    """A real crash (immediate stop) right after the loser's commit, with its WAL not
    written yet: the commit is gone, and nothing with it. The winner's claim is whole (its
    commit waited for the flush), and the loser claims again as after any empty claim."""
    cluster = LocalCluster(
        settings={
            # nothing else writes WAL in the few milliseconds between the commit and the crash
            "synchronous_commit": "on",
            "wal_writer_delay": "10s",
            "bgwriter_lru_maxpages": "0",
            "autovacuum": "off",
            "checkpoint_timeout": "1h",
        }
    )
    cluster.start()
    try:
        with psycopg.connect(cluster.dsn, autocommit=True) as admin:
            admin.execute("create database crash")
        dsn = cluster.dsn_for("crash")
        with psycopg.connect(dsn) as setup:
            run_id = first_chat_run(setup, "c")
        loser_key = uuid.uuid4()
        with _worker(dsn) as winner, _worker(dsn) as loser:
            winner.execute("begin")
            assert [r[0] for r in winner.execute(CLAIM, worker_claim("w-winner"))] == [run_id]
            loser.execute("begin")
            assert loser.execute(CLAIM, worker_claim("w-loser", key=loser_key)).fetchall() == []
            # the loser's first claim created its receipt: the write the crash will take (an
            # idle claim under the worker's work-conserving bound locks no bound row)
            assert (
                loser.execute(
                    "select count(*) from runlane.claim_receipts where worker_id = 'w-loser'"
                ).fetchone()[0]
                == 1
            )
            winner.execute("commit")  # flushed
            loser.execute("commit")  # not flushed: WAL buffers only
            unwritten = loser.execute(
                "select pg_current_wal_insert_lsn() > pg_current_wal_lsn()"
            ).fetchone()[0]
            assert unwritten, "the loser's commit was written already: no loss to show"
            cluster.stop("immediate")
        cluster.start()
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert (
                conn.execute(
                    "select count(*) from runlane.claim_receipts where worker_id = 'w-loser'"
                ).fetchone()[0]
                == 0
            ), "the loser's commit survived the crash: nothing was tested"
            assert conn.execute(
                "select state, lease_owner, fence from runlane.runs where run_id = %s", (run_id,)
            ).fetchone() == ("running", "w-winner", 1)
            assert (
                conn.execute(
                    "select count(*) from runlane.run_events where run_id = %s "
                    "and event = 'run.claimed'",
                    (run_id,),
                ).fetchone()[0]
                == 1
            )
            assert conn.execute(
                "select run_ids from runlane.claim_receipts where "
                "worker_id = 'w-winner' and lanes = '{interactive}'"
            ).fetchone()[0] == [run_id]
        with _worker(dsn) as loser:
            # its reply said "nothing"; the same key again finds nothing to claim either
            assert loser.execute(CLAIM, worker_claim("w-loser", key=loser_key)).fetchall() == []
    finally:
        cluster.destroy()
