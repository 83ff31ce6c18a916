"""PgBouncer in front of runlane, with Debian's pgbouncer started by
the tests (tests/runner/bouncer_helpers.py).

- Applications through TRANSACTION pooling, as a login holding only runlane_api, with
  psycopg 3 as an application uses it: submit_message with an idempotency key (and its
  retry), publish_run, run_now, run_status, cancel_run (Stop) and paging outputs_since,
  from several concurrent clients over fewer server connections; a real worker connected
  directly runs what they submit, woken by notifications alone (its scan is an hour).
- Prepared statements: Debian bookworm's pgbouncer is 1.18, which does not carry
  protocol-level prepared statements across transaction pooling (1.21 does, with
  max_prepared_statements > 0). With prepare_threshold=None psycopg never prepares and
  everything works; with prepare_threshold=0 (psycopg's default of 5 gets there after
  five calls of a statement) a second client's first statement fails.
- Workers: a `runlane worker` through transaction pooling refuses to start (exit code 2,
  one clear line on stderr) because its LISTEN cannot work there; through SESSION
  pooling it starts and runs runs, woken by notifications alone.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import uuid

import httpx
import psycopg
import pytest
from bouncer_helpers import Bouncer
from worker_helpers import WorkerProcess, make_agent, wait_until, workers  # noqa: F401

from runlane.pgcluster import SUPERUSER

API_LOGIN = f"rl_bouncer_api_{os.getpid()}"
TERMINAL = {"succeeded", "failed", "canceled", "skipped"}
CLIENTS = 6  # concurrent application connections ...
POOL_SIZE = 2  # ... over at most this many server connections (per database and login)
MESSAGES = 3  # per client


@pytest.fixture(scope="module")
def api_login(pg_cluster, template_db):
    """A login holding only runlane_api (roles are the cluster's: every test database)."""
    with psycopg.connect(pg_cluster.dsn, autocommit=True) as conn:
        conn.execute(f'create role "{API_LOGIN}" login')
        conn.execute(f'grant runlane_api to "{API_LOGIN}"')
    yield API_LOGIN
    with psycopg.connect(pg_cluster.dsn, autocommit=True) as conn:
        conn.execute(f'drop role "{API_LOGIN}"')


@pytest.fixture(scope="module")
def tx_bouncer(pg_cluster, api_login):
    bouncer = Bouncer(
        pg_cluster.port, "transaction", [api_login, SUPERUSER], pool_size=POOL_SIZE
    ).start()
    yield bouncer
    bouncer.stop()


@pytest.fixture(scope="module")
def session_bouncer(pg_cluster):
    bouncer = Bouncer(pg_cluster.port, "session", [SUPERUSER], pool_size=40).start()
    yield bouncer
    bouncer.stop()


def app_connect(bouncer: Bouncer, db_dsn: str, **kwargs) -> psycopg.Connection:
    """An application's connection through the bouncer, as the runlane_api login, with
    the setting PgBouncer < 1.21 needs (prepare_threshold=None) unless told otherwise."""
    settings = {"autocommit": True, "prepare_threshold": None, **kwargs}
    with psycopg.connect(db_dsn, autocommit=True) as owner:  # this database's entry
        owner.execute("select runlane.scope_api_login(%s, null)", (API_LOGIN,))
    return psycopg.connect(bouncer.dsn(db_dsn, user=API_LOGIN), **settings)


def status(app: psycopg.Connection, run_id: int) -> dict:
    cur = app.execute("select * from runlane.run_status(%s)", (run_id,))
    names = [d.name for d in cur.description]
    return dict(zip(names, cur.fetchone(), strict=True))


def wait_terminal(app: psycopg.Connection, run_id: int) -> dict:
    return wait_until(
        lambda: (s := status(app, run_id))["state"] in TERMINAL and s,
        what=f"run {run_id} to finish",
    )


def page_outputs(app: psycopg.Connection, run_id: int, page: int) -> list[tuple[int, str]]:
    """Every visible output of the run, paged with outputs_since until a short page."""
    seen: list[tuple[int, str]] = []
    while True:
        rows = app.execute(
            "select output_id, body from runlane.outputs_since(%s, %s, %s)",
            (run_id, seen[-1][0] if seen else 0, page),
        ).fetchall()
        seen += rows
        if len(rows) < page:
            return seen


def start_direct_worker(workers) -> WorkerProcess:  # noqa: F811 - the fixture
    """A worker connected directly, woken by notifications alone (scan every hour)."""
    worker = workers(
        "--agent",
        "life_agent:agent",
        "--scan-interval",
        "3600",
        lanes=("interactive", "background"),
        env={"LIFE_AGENT_DELAY": "0.05"},
    )
    worker.wait_for("worker.listen_proven")
    worker.wait_for("listener.listening")
    return worker


def test_applications_submit_publish_and_read_through_transaction_pooling(
    conn,
    db_dsn,
    tx_bouncer,
    workers,  # noqa: F811
):
    make_agent(conn, "agent-b", "org-b")
    start_direct_worker(workers)
    apps = [app_connect(tx_bouncer, db_dsn) for _ in range(CLIENTS)]
    all_connected = threading.Barrier(CLIENTS)
    backends: list[set[int]] = [set() for _ in range(CLIENTS)]
    results: list[list[tuple[str, tuple, tuple, dict, list]]] = [[] for _ in range(CLIENTS)]
    errors: list[BaseException] = []

    def client(i: int) -> None:
        app = apps[i]
        try:
            all_connected.wait(60)  # every client holds its connection from here on
            runs = []
            for k in range(MESSAGES):
                key = f"key-{i}-{k}"
                args = ("agent-b", f"thread-{i}-{k}", f"hello {i} {k}", key)
                first = app.execute(
                    "select * from runlane.submit_message(%s, %s, %s, %s)", args
                ).fetchone()
                again = app.execute(
                    "select * from runlane.submit_message(%s, %s, %s, %s)", args
                ).fetchone()  # the application's retry
                app.execute("select runlane.publish_run(%s)", (first[1],))
                backends[i].add(app.execute("select pg_backend_pid()").fetchone()[0])
                runs.append((key, first, again))
            for key, first, again in runs:
                final = wait_terminal(app, first[1])
                backends[i].add(app.execute("select pg_backend_pid()").fetchone()[0])
                results[i].append((key, first, again, final, page_outputs(app, first[1], 1)))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    try:
        assert not errors, errors
        # The pooling is real: CLIENTS connections open at once, every statement of them
        # served by at most POOL_SIZE server sessions.
        assert len(set().union(*backends)) <= POOL_SIZE < CLIENTS
        for i in range(CLIENTS):
            assert len(results[i]) == MESSAGES
            for k, (_key, first, again, final, outputs) in enumerate(results[i]):
                assert first[2] == "created" and again == first  # the retry: the same row
                assert final["state"] == "succeeded"
                assert [body for _id, body in outputs] == [f"echo: hello {i} {k}"]
                assert final["last_output_id"] == outputs[-1][0]
        # From the database: one message and one succeeded run per key, nothing twice.
        assert conn.execute(
            "select count(*), count(distinct run_id) from runlane.messages"
        ).fetchone() == (CLIENTS * MESSAGES, CLIENTS * MESSAGES)
        assert conn.execute(
            "select state, count(*) from runlane.runs group by state"
        ).fetchall() == [("succeeded", CLIENTS * MESSAGES)]

        # Run now with its key, through the same pool; its retry returns the same run.
        app = apps[0]
        conn.execute("select runlane_test.agent('agent-r', 'org-b')")
        first = app.execute(
            "select run_id, state from runlane.run_now('agent-r', 'rn-1')"
        ).fetchone()
        again = app.execute(
            "select run_id, state from runlane.run_now('agent-r', 'rn-1')"
        ).fetchone()
        assert first == again and first[1] == "queued"
        app.execute("select runlane.publish_run(%s)", (first[0],))
        assert wait_terminal(app, first[0])["state"] == "succeeded"
    finally:
        for app in apps:
            app.close()


def test_stop_and_paging_through_transaction_pooling(conn, db_dsn, tx_bouncer, workers):  # noqa: F811
    make_agent(conn, "agent-s", "org-s")
    start_direct_worker(workers)
    with app_connect(tx_bouncer, db_dsn) as app, app_connect(tx_bouncer, db_dsn) as other:
        _message, run_id, disposition = app.execute(
            "select * from runlane.submit_message('agent-s', 'thread-1', 'slow work please')"
        ).fetchone()
        assert disposition == "created"
        other.execute("select runlane.publish_run(%s)", (run_id,))
        # The agent writes a chunk every 0.05 s until stopped: wait for a few of them.
        wait_until(
            lambda: (
                status(other, run_id)["state"] == "running"
                and len(page_outputs(app, run_id, 500)) >= 5
            ),
            what="five chunks",
        )
        assert other.execute("select runlane.cancel_run(%s)", (run_id,)).fetchone()[0] == "running"
        final = wait_terminal(app, run_id)
        assert (final["state"], final["reason"]) == ("canceled", "canceled")
        pages_of_2 = page_outputs(app, run_id, 2)
        assert pages_of_2 == page_outputs(other, run_id, 500)
        assert (
            pages_of_2
            == conn.execute(
                "select output_id, body from runlane.run_outputs where run_id = %s "
                "and kind = 'text' order by output_id",
                (run_id,),
            ).fetchall()
        )
        assert [body for _id, body in pages_of_2] == [f"<{n}>" for n in range(len(pages_of_2))]
        assert final["last_output_id"] == pages_of_2[-1][0]


def test_prepared_statements_need_prepare_threshold_none_on_pgbouncer_1_18(
    conn, db_dsn, tx_bouncer
):
    """PgBouncer 1.18 (Debian bookworm) passes psycopg's named prepared statements to
    whichever server session runs the transaction: a second client's prepare of the same
    name fails (42P05), or an execute lands where it was never prepared (26000)."""
    make_agent(conn, "agent-p", "org-p")
    run_id = conn.execute(
        "select run_id from runlane.submit_message('agent-p', 't', 'x')"
    ).fetchone()[0]
    # With prepare_threshold=None (the documented setting) any number of clients and
    # calls work: nothing is prepared on the server.
    plain = [app_connect(tx_bouncer, db_dsn) for _ in range(3)]
    try:
        for _ in range(8):
            for app in plain:
                assert status(app, run_id)["state"] == "queued"
    finally:
        for app in plain:
            app.close()
    # prepare_threshold=0, as psycopg sends prepared statements: the first client
    # prepares _pg3_0 on a server session; the second prepares its own _pg3_0 there too.
    prepared = [app_connect(tx_bouncer, db_dsn, prepare_threshold=0) for _ in range(2)]
    try:
        with pytest.raises(psycopg.Error) as failed:
            for _ in range(3):
                for app in prepared:
                    status(app, run_id)
        assert failed.value.sqlstate in ("42P05", "26000"), failed.value
        assert "_pg3_" in str(failed.value)
    finally:
        for app in prepared:
            app.close()


def test_a_worker_behind_transaction_pooling_refuses_to_start(conn, db_dsn, tx_bouncer):
    make_agent(conn, "agent-t", "org-t")
    run_id = conn.execute(
        "select run_id from runlane.submit_message('agent-t', 't', 'x')"
    ).fetchone()[0]
    worker = WorkerProcess(tx_bouncer.dsn(db_dsn))
    try:
        assert worker.wait_exit() == 2
        stderr = worker.proc.stderr.read() if worker.proc.stderr else ""
        dbname = db_dsn.rsplit("/", 1)[1]
        assert stderr.startswith(
            f"error: LISTEN does not work on 127.0.0.1:{tx_bouncer.port}/{dbname}: a "
            "notification sent on a private channel did not reach the listening "
            "connection within 10 s."
        ), stderr
        assert "pool_mode = session" in stderr and "docs/operations.md#pgbouncer" in stderr
        assert "Traceback" not in stderr
        assert [r["message"] for r in worker.events("worker.listen_refused")] == [
            "worker.listen_refused"
        ]
        assert worker.events("worker.started") == []
        # It refused before doing anything: never registered, nothing claimed.
        assert (
            conn.execute(
                "select count(*) from runlane.workers where worker_id = %s", (worker.worker_id,)
            ).fetchone()[0]
            == 0
        )
        assert (
            conn.execute("select state from runlane.runs where run_id = %s", (run_id,)).fetchone()[
                0
            ]
            == "queued"
        )
    finally:
        worker.close()
        worker.check_logs()


def test_a_stop_during_the_listen_check_ends_the_worker_cleanly(conn, db_dsn, tx_bouncer):
    """SIGTERM while the check waits (behind transaction pooling, where it would refuse):
    the worker stops at once as any worker does, exit code 0, no refusal."""
    make_agent(conn, "agent-q", "org-q")
    worker = WorkerProcess(tx_bouncer.dsn(db_dsn))
    try:
        worker.wait_for("worker.listen_checking")
        worker.signal(signal.SIGTERM)
        assert worker.wait_exit() == 0
        assert worker.events("worker.listen_refused") == []
        assert [r["message"] for r in worker.events("worker.stopped")] == ["worker.stopped"]
    finally:
        worker.close()
        worker.check_logs()


def test_a_worker_behind_session_pooling_listens_and_runs_runs(
    conn, db_dsn, tx_bouncer, session_bouncer
):
    make_agent(conn, "agent-w", "org-w")
    worker = WorkerProcess(
        session_bouncer.dsn(db_dsn), "--agent", "life_agent:agent", "--scan-interval", "3600"
    )
    try:
        worker.wait_for("worker.listen_proven")
        worker.wait_for("listener.listening")
        with app_connect(tx_bouncer, db_dsn) as app:
            runs = []
            for k in range(5):
                run_id = app.execute(
                    "select run_id from runlane.submit_message('agent-w', %s, %s, %s)",
                    (f"thread-{k}", f"hi {k}", f"k-{uuid.uuid4().hex}"),
                ).fetchone()[0]
                app.execute("select runlane.publish_run(%s)", (run_id,))
                runs.append(run_id)
            # Woken by notifications alone (its scan is an hour): LISTEN works here.
            for k, run_id in enumerate(runs):
                assert wait_terminal(app, run_id)["state"] == "succeeded"
                assert page_outputs(app, run_id, 500)[0][1] == f"echo: hi {k}"
        # The maintenance leader's lease (a row, not a session lock) works here too.
        wait_until(
            lambda: conn.execute(
                "select leader from runlane.leader where role = 'maintenance'"
            ).fetchone(),
            what="a maintenance leader",
        )
        assert (
            conn.execute("select leader from runlane.leader where role = 'maintenance'")
            .fetchone()[0]
            .startswith(f"runlane-worker:{worker.worker_id}/")
        )
    finally:
        worker.close()
        worker.check_logs()


def test_a_scan_only_worker_runs_runs_behind_transaction_pooling(conn, db_dsn, tx_bouncer):
    """Where the LISTEN check refuses (transaction pooling), `--scan-only` opts out of
    LISTEN: the worker says so (a warning), never checks, and claims and finishes chat
    runs by its scan alone (its ordinary scan is an hour: only the fast scan finds them),
    with no pass and no maintenance step failing meanwhile."""
    make_agent(conn, "agent-s", "org-s")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    worker = WorkerProcess(
        tx_bouncer.dsn(db_dsn),
        "--scan-only",
        "--scan-interval",
        "3600",
        "--tick-interval",
        "0.2",
        "--leader-retry",
        "0.2",
        "--leader-ttl",
        "2",
        "--metrics-port",
        str(port),
    )
    try:
        warned = worker.wait_for("worker.scan_only")
        assert warned["level"] == "warning"
        assert warned["dispatch.fast_scan_interval_s"] == 0.1
        worker.wait_for("dispatch.ready")
        runs = [
            conn.execute(
                "select run_id from runlane.submit_message('agent-s', %s, %s)",
                (f"thread-{k}", f"hi {k}"),
            ).fetchone()[0]
            for k in range(3)
        ]
        for run_id in runs:
            conn.execute("select runlane.publish_run(%s)", (run_id,))
        for k, run_id in enumerate(runs):
            wait_until(
                lambda r=run_id: (
                    conn.execute(
                        "select state from runlane.runs where run_id = %s", (r,)
                    ).fetchone()[0]
                    == "succeeded"
                ),
                what=f"run {run_id} answered",
            )
            assert (
                conn.execute(
                    "select string_agg(body, '' order by output_id) from runlane.run_outputs "
                    "where run_id = %s and kind = 'text'",
                    (run_id,),
                ).fetchone()[0]
                == f"hi {k}"
            )
        # Many scans and maintenance passes later, nothing failed on a lost statement.
        worker.wait_for("maintenance.leader_acquired")
        for message in (
            "worker.listen_checking",
            "worker.listen_refused",
            "listener.listening",
            "dispatch.pass_failed",
            "maintenance.step_failed",
        ):
            assert worker.events(message) == [], message
        assert worker.proc.poll() is None
        shown = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text.splitlines()
        assert "runlane_dispatch_scan_only 1.0" in shown
        assert "runlane_dispatch_fast_scan 1.0" in shown
    finally:
        worker.close()
        worker.check_logs()
