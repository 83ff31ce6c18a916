"""`runlane migrate` during a live write load: a staged upgrade's migrate step does not
deadlock with the workers (soak/failover.py's failover_upgrade exercises the same).

The database starts at migration 0011; two real `runlane worker` processes drain chat runs
while a thread keeps submitting and publishing messages; then `runlane migrate` (the CLI)
applies 0012 and whatever follows. 0012 creates two indexes on runs (SHARE) and then drops
one (ACCESS EXCLUSIVE): taken as its statements come, that lock upgrade closes a cycle with
any worker transaction that read runs and then writes it (40P01). The migrate runner takes
ACCESS EXCLUSIVE on runs up front instead (runlane.migrate.planned_locks), so it applies,
and nothing submitted is lost.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
from worker_helpers import MARKER, WorkerProcess, make_agent, wait_until

from runlane.migrate import migrate, migrations

FIXTURES = Path(__file__).parent.parent / "sql" / "fixtures"
AGENTS = [f"chat-{i}" for i in range(3)]


def _prepare(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn, to=11)
        conn.execute("create schema if not exists runlane_test")
        for path in sorted(FIXTURES.glob("*.sql")):
            conn.execute(path.read_text())
        for agent in AGENTS:
            make_agent(conn, agent)


class Submitter(threading.Thread):
    """Submits and publishes chat messages until stopped; keeps the acknowledged message
    ids and every error (an acknowledged message must end in a succeeded run)."""

    def __init__(self, dsn: str):
        super().__init__(daemon=True)
        self.dsn = dsn
        self.stop = threading.Event()
        self.acknowledged: list[int] = []
        self.errors: list[str] = []

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            n = 0
            while not self.stop.is_set():
                agent = AGENTS[n % len(AGENTS)]
                try:
                    message_id, run_id, _ = conn.execute(
                        "select * from runlane.submit_message(%s, %s, %s)",
                        (agent, f"thread-{n % 6}", f"message {n} {MARKER}"),
                    ).fetchone()
                    if run_id is not None:  # a held message has no run yet
                        conn.execute("select runlane.publish_run(%s)", (run_id,))
                    self.acknowledged.append(message_id)
                except psycopg.Error as exc:
                    self.errors.append(exc.sqlstate or type(exc).__name__)
                n += 1
                time.sleep(0.005)


def unfinished(dsn: str, message_ids: list[int]) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            """
            select m.message_id, r.state
            from runlane.messages as m
            left join runlane.runs as r on r.run_id = m.run_id
            where m.message_id = any(%s) and r.state is distinct from 'succeeded'
            order by m.message_id
        """,
            (message_ids,),
        ).fetchall()


def succeeded(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "select count(*) from runlane.runs where state = 'succeeded'"
        ).fetchone()[0]


def test_migrate_applies_0012_under_a_live_write_load(empty_db_dsn):
    _prepare(empty_db_dsn)
    workers = [WorkerProcess(empty_db_dsn) for _ in range(2)]
    submitter = Submitter(empty_db_dsn)
    try:
        submitter.start()
        wait_until(lambda: succeeded(empty_db_dsn) >= 30, what="the load to run")
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "runlane",
                "migrate",
                "--dsn",
                empty_db_dsn,
                "--lock-timeout",
                "20",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        # the load goes on a little after the upgrade, against the new schema
        after = len(submitter.acknowledged)
        wait_until(lambda: len(submitter.acknowledged) >= after + 20, what="more submissions")
        submitter.stop.set()
        submitter.join(30)

        assert result.returncode == 0, result.stderr
        assert "applied 0012_dashboard_indexes" in result.stdout
        with psycopg.connect(empty_db_dsn) as conn:
            versions = [
                v
                for (v,) in conn.execute(
                    "select version from runlane.schema_migrations order by version"
                )
            ]
            indexes = {
                name
                for (name,) in conn.execute(
                    "select indexname from pg_indexes where schemaname = 'runlane' "
                    "and tablename = 'runs'"
                )
            }
        assert versions == [m.version for m in migrations()]
        # 0012's indexes, as later migrations left them (0017 replaced runs_agent_newest_idx).
        assert {"runs_unfinished_lane_idx", "runs_agent_history_idx"} <= indexes
        assert {"runs_agent_idx", "runs_agent_newest_idx"}.isdisjoint(indexes)
        assert submitter.errors == []
        assert len(submitter.acknowledged) > 50
        wait_until(
            lambda: not unfinished(empty_db_dsn, submitter.acknowledged),
            what="every acknowledged message to end in a succeeded run",
        )
        assert all(w.proc.poll() is None for w in workers)  # none of them died under it
    finally:
        submitter.stop.set()
        for worker in workers:
            worker.close()
    for worker in workers:
        worker.check_logs()
