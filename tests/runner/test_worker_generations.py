"""The runner across schema generations: new workers register as generation 2,
`runlane worker --deliveries legacy` runs the older generation's statements as a real
process (and drains on SIGTERM), and `runlane upgrade-status` says what still blocks the
contract step."""

from __future__ import annotations

import signal
import subprocess
import sys
from importlib import resources

import psycopg
import pytest
import worker_helpers
from worker_helpers import WorkerProcess, wait_until

from runlane.migrate import migrate

workers = worker_helpers.workers


def legacy_statement(name: str) -> str:
    return (resources.files("runlane") / "sql" / "legacy" / f"{name}.sql").read_text()


def cli(*args: str, dsn: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runlane", *args, "--dsn", dsn], capture_output=True, text=True
    )


@pytest.fixture
def expanded_dsn(empty_db_dsn):
    """A database in the middle of a rolling upgrade: expanded (0002), not contracted."""
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        migrate(conn, to=2)
        conn.execute("create schema runlane_test")
        from conftest import FIXTURES

        conn.execute((FIXTURES / "00_core.sql").read_text())
    return empty_db_dsn


def test_a_new_worker_registers_as_generation_2_and_marks_its_exit(conn, workers):
    worker = workers("--no-maintenance")
    worker.wait_for("dispatch.ready")
    row = wait_until(
        lambda: conn.execute(
            "select generation, deliveries, lanes from runlane.workers where worker_id = %s",
            (worker.worker_id,),
        ).fetchone(),
        what="registry row",
    )
    assert row == (2, "direct", ["interactive"])
    worker.signal(signal.SIGTERM)
    assert worker.wait_exit() == 0
    assert conn.execute(
        "select stopped_at is not null from runlane.workers where worker_id = %s",
        (worker.worker_id,),
    ).fetchone()[0]


def test_a_legacy_delivery_worker_executes_deliveries_and_drains_on_sigterm(expanded_dsn):
    with psycopg.connect(expanded_dsn, autocommit=True) as conn:
        conn.execute("select runlane_test.agent('agent-old')")
        run_id = conn.execute(
            legacy_statement("create_run"),
            {"agent_id": "agent-old", "lane": "background", "trigger": "manual"},
        ).fetchone()[0]
        conn.execute(legacy_statement("enqueue_run_delivery"), {"run_id": run_id})
        worker = WorkerProcess(expanded_dsn, "--deliveries", "legacy", lanes=("background",))
        try:
            wait_until(
                lambda: conn.execute(
                    "select state = 'succeeded' from runlane.runs where run_id = %s", (run_id,)
                ).fetchone()[0],
                what="the delivered run succeeds",
            )
            fence, attempts, outputs = conn.execute(
                "select fence, attempts, (select count(*) from runlane.run_outputs o "
                "where o.run_id = r.run_id) from runlane.runs r where run_id = %s",
                (run_id,),
            ).fetchone()
            assert (fence, attempts, outputs) == (1, 1, 1), (
                "the older generation's claim went through the same fence, once"
            )
            assert conn.execute(
                "select generation, deliveries from runlane.workers where worker_id = %s",
                (worker.worker_id,),
            ).fetchone() == (1, "legacy")
            refused = cli("migrate", dsn=expanded_dsn)
            assert refused.returncode == 2 and "RL009" in refused.stderr
            assert worker.worker_id in refused.stderr, "the refusal names the live older worker"

            worker.signal(signal.SIGTERM)
            assert worker.wait_exit() == 0
        finally:
            worker.close()
        assert conn.execute(
            "select stopped_at is not null from runlane.workers where worker_id = %s",
            (worker.worker_id,),
        ).fetchone()[0]
        status = cli("upgrade-status", dsn=expanded_dsn)
        assert status.returncode == 0, status.stdout
        assert "ready" in status.stdout
        applied = cli("migrate", dsn=expanded_dsn)
        assert applied.returncode == 0, applied.stderr
        assert "0003" in applied.stdout


def test_upgrade_status_lists_what_blocks_the_contract_step(expanded_dsn):
    with psycopg.connect(expanded_dsn, autocommit=True) as conn:
        conn.execute("select runlane_test.agent('agent-q')")
        run_id = conn.execute(
            legacy_statement("create_run"),
            {"agent_id": "agent-q", "lane": "background", "trigger": "manual"},
        ).fetchone()[0]
        conn.execute(legacy_statement("enqueue_run_delivery"), {"run_id": run_id})
        blocked = cli("upgrade-status", dsn=expanded_dsn)
        assert blocked.returncode == 1
        assert f"run {run_id}" in blocked.stdout
        conn.execute("delete from runlane.run_jobs")
        ready = cli("upgrade-status", dsn=expanded_dsn)
        assert ready.returncode == 0, ready.stdout
