"""The table locks `runlane migrate` takes up front for each migration.

Every released migration (0001-0021) is classified (none falls back to taking its locks as its
statements come), and on a real database at the version before it, each one locks exactly
the existing tables it touches, in sorted order, in the strongest mode it needs there.
A lock held by another session is waited for in short attempts until --lock-timeout,
then named in the error with its holder.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from worker_helpers import wait_until

from runlane.migrate import (
    ACCESS_EXCLUSIVE as AE,
)
from runlane.migrate import (
    EXCLUSIVE,
    ROW_EXCLUSIVE,
    SHARE,
    SHARE_ROW_EXCLUSIVE,
    SHARE_UPDATE_EXCLUSIVE,
    MigrationError,
    covering_mode,
    migrate,
    migration_locks,
    migrations,
    planned_locks,
)

SRE = SHARE_ROW_EXCLUSIVE

# What each migration locks on a database at the version before it. Tables it creates
# itself do not exist yet and are not locked (nobody else can hold them).
EXPECTED = {
    1: [],
    2: [("runlane.agents", AE), ("runlane.runs", AE)],
    3: [("runlane.run_jobs", EXCLUSIVE), ("runlane.runs", AE), ("runlane.workers", EXCLUSIVE)],
    4: [("runlane.runs", AE)],
    5: [],
    6: [("runlane.runs", AE)],
    7: [("runlane.platform_settings", SRE), ("runlane.runs", SHARE)],
    8: [("runlane.runs", SRE)],
    9: [("runlane.agents", SRE), ("runlane.messages", SRE), ("runlane.runs", SRE)],
    10: [("runlane.run_events", SHARE_UPDATE_EXCLUSIVE), ("runlane.runs", SHARE)],
    11: [("runlane.runs", SHARE)],
    12: [("runlane.runs", AE)],  # CREATE INDEX (SHARE) then DROP INDEX runs_agent_idx
    13: [("runlane.runs", SHARE)],
    14: [("runlane.runs", AE)],  # CREATE INDEX (SHARE) then DROP INDEX runs_running_idx
    15: [("runlane.runs", AE)],  # DROP INDEX runs_lease_expiry_idx
    16: [("runlane.messages", AE), ("runlane.runs", AE)],  # a key between them, DROP INDEX
    17: [("runlane.runs", AE)],  # CREATE INDEX (SHARE) then DROP INDEX
    18: [("runlane.runs", AE)],  # CREATE INDEX (SHARE) then DROP INDEX runs_claim_order_idx
    19: [],  # a new table, filled from platform_settings (read, not locked)
    # COMMENT ON the superseded table; a foreign key to the organizations
    20: [("runlane.api_scopes", SHARE_UPDATE_EXCLUSIVE), ("runlane.platform_settings", SRE)],
    # new columns (ALTER TABLE), the claim indexes rebuilt with the handler
    21: [("runlane.agents", AE), ("runlane.runs", AE), ("runlane.workers", AE)],
    22: [("runlane.charges", AE)],  # DROP NOT NULL: reads no row
    23: [("runlane.run_events", SHARE)],
    24: [("runlane.runs", SHARE)],
    25: [],  # DROP FUNCTION: no table
    # ADD COLUMN (no default: no row written), rows for threads with unfinished chat runs
    26: [("runlane.threads", AE)],
    # ADD COLUMN org_id on six tables; the four small ones filled under that lock
    27: [
        ("runlane.charge_buckets", AE),
        ("runlane.computer_leases", AE),
        ("runlane.idempotency_keys", AE),
        ("runlane.run_events", AE),
        ("runlane.run_outputs", AE),
        ("runlane.threads", AE),
    ],
    # the older outputs and journal rows filled: row locks only, nobody else writes them
    28: [("runlane.run_events", ROW_EXCLUSIVE), ("runlane.run_outputs", ROW_EXCLUSIVE)],
    # the keys of every table an organization owns rebuilt with org_id (two new tables)
    29: [
        ("runlane.agents", AE),
        ("runlane.charge_buckets", AE),
        ("runlane.charges", AE),
        ("runlane.computer_leases", AE),
        ("runlane.idempotency_keys", AE),
        ("runlane.messages", AE),
        ("runlane.run_events", AE),
        ("runlane.run_outputs", AE),
        ("runlane.runs", AE),
        ("runlane.threads", AE),
        ("runlane.users", AE),
    ],
    30: [],  # a new table
    31: [],  # DROP FUNCTION: no table
}


def test_every_released_migration_locks_what_it_touches_up_front(empty_db_dsn):
    known = migrations()
    assert set(EXPECTED) <= {m.version for m in known}
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        for before, m in zip([None, *known], known, strict=False):
            if before is not None:
                migrate(conn, to=before.version)
            planned = planned_locks(conn, m)
            assert planned is not None, f"{m.version:04d} is not classified"
            if m.version in EXPECTED:
                assert planned == EXPECTED[m.version], m.version
            assert planned == sorted(planned)


def test_the_covering_mode_is_the_weakest_that_needs_no_upgrade():
    assert covering_mode({SHARE}) == SHARE
    assert covering_mode({SHARE, ROW_EXCLUSIVE}) == SRE  # not SHARE: its writes would wait
    assert covering_mode({SHARE, AE}) == AE
    assert covering_mode({ROW_EXCLUSIVE, SHARE_UPDATE_EXCLUSIVE}) == SHARE_UPDATE_EXCLUSIVE


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "-- drop table runlane.x;\ncreate index if not exists i on runlane.runs (a);\n"
            "/* alter table runlane.y */ drop index if exists runlane.i, runlane.j;",
            {("table", "runs"): {SHARE}, ("index", "i"): {AE}, ("index", "j"): {AE}},
        ),
        (
            "alter table if exists only runlane.t add column c int references runlane.u (id);",
            {("table", "t"): {AE}, ("table", "u"): {SRE}},
        ),
        (
            "lock table runlane.a, runlane.b; lock runlane.c in row exclusive mode;",
            {("table", "a"): {AE}, ("table", "b"): {AE}, ("table", "c"): {ROW_EXCLUSIVE}},
        ),
        (
            "create function runlane.f() returns trigger language plpgsql as $f$ begin\n"
            "  delete from runlane.x; return new; end $f$;\n"
            "create trigger t before update on runlane.runs "
            "for each row execute function runlane.f();",
            {("table", "runs"): {AE}},
        ),
        (
            "comment on table runlane.runs is 'drop table runlane.x; alter table runlane.y';",
            {("table", "runs"): {SHARE_UPDATE_EXCLUSIVE}},
        ),
        (
            "do $d$ begin update runlane.runs set cost = 0; end $d$;",
            {("table", "runs"): {ROW_EXCLUSIVE}},
        ),
    ],
)
def test_statement_forms_are_classified(sql, expected):
    assert migration_locks(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "select runlane.rebuild_everything();",
        "do $d$ begin execute 'alter table runlane.runs add column x int'; end $d$;",
        "create index i on runs (a);",  # not schema-qualified
        "reindex table runlane.runs;",
    ],
)
def test_a_statement_it_cannot_classify_keeps_the_old_behaviour(sql):
    assert migration_locks(sql) is None


def test_a_held_lock_fails_after_lock_timeout_naming_table_and_holder(empty_db_dsn):
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        migrate(conn, to=11)
        with psycopg.connect(empty_db_dsn) as holder:
            holder.execute("set application_name = 'reader-of-runs'")
            holder.execute("select count(*) from runlane.runs")  # ACCESS SHARE, left open
            with pytest.raises(MigrationError) as raised:
                migrate(conn, lock_timeout=1.5)
            message = str(raised.value)
            assert "0012_dashboard_indexes" in message
            assert "runlane.runs in access exclusive mode" in message
            assert f"pid {holder.info.backend_pid}" in message
            assert "reader-of-runs" in message
            applied = [
                v
                for (v,) in conn.execute(
                    "select version from runlane.schema_migrations order by version"
                )
            ]
            assert applied == list(range(1, 12))  # nothing of 0012 committed
            holder.rollback()
        assert [m.version for m in migrate(conn)][0] == 12


def _migrate_in_background(dsn: str, outcome: dict, **kwargs) -> threading.Thread:
    """`migrate(**kwargs)` from a connection named 'migrator', in a started thread; the
    versions it applied land in outcome['applied'], an exception in outcome['error']."""

    def run() -> None:
        try:
            with psycopg.connect(dsn, application_name="migrator") as mconn:
                outcome["applied"] = [m.version for m in migrate(mconn, **kwargs)]
        except Exception as exc:  # noqa: BLE001 - asserted by the caller
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_transaction_that_read_runs_and_then_writes_it_does_not_deadlock_with_0012(empty_db_dsn):
    """The lock-upgrade cycle, made deterministic: a worker-like transaction reads runs
    (ACCESS SHARE) and, while migrate waits for its lock on runs, writes runs (ROW
    EXCLUSIVE). A migrate holding SHARE (0012's CREATE INDEX) while waiting for ACCESS
    EXCLUSIVE (DROP INDEX) would close a cycle that PostgreSQL ends with 40P01; migrate
    holds nothing on runs while it waits, so the writer goes first and both succeed."""
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        migrate(conn, to=11)
    outcome: dict[str, object] = {}

    with (
        psycopg.connect(empty_db_dsn) as worker,
        psycopg.connect(empty_db_dsn, autocommit=True) as watcher,
    ):
        worker.execute("select count(*) from runlane.runs")
        thread = _migrate_in_background(empty_db_dsn, outcome, lock_timeout=30)
        wait_until(
            lambda: watcher.execute("""
            select 1 from pg_locks as l join pg_stat_activity as a on a.pid = l.pid
            where a.application_name = 'migrator' and not l.granted
              and l.relation = 'runlane.runs'::regclass""").fetchone(),
            what="migrate to wait for its lock on runs",
        )
        worker.execute("update runlane.runs set cost = cost where false")
        worker.commit()
        thread.join(60)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["applied"][0] == 12


def test_a_client_queued_behind_an_earlier_lock_is_not_the_deadlock_victim(empty_db_dsn):
    """0016 locks messages, then runs. A chat client that has read runs queues behind
    migrate's request for messages while migrate still waits for messages (another
    session writes them); when that session commits, migrate takes messages and asks for
    runs: a cycle whose first deadlock check is the client's, which began waiting first.
    Before, each lock had a second of its own and PostgreSQL ended the client with 40P01;
    now the attempt as a whole gives up within half of deadlock_timeout of its start,
    releases messages, the client goes on, and migrate retries until the client is done."""
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        migrate(conn, to=15)
    outcome: dict[str, object] = {}

    def client_reads_messages(client: psycopg.Connection) -> None:
        try:
            client.execute("select count(*) from runlane.messages").fetchone()
            outcome["client"] = "read"
        except psycopg.Error as exc:
            outcome["client"] = exc.sqlstate

    def waiting(application: str, table: str):
        return lambda: watcher.execute(
            """select 1 from pg_locks as l join pg_stat_activity as a on a.pid = l.pid
               where a.application_name = %s and not l.granted
                 and l.relation = %s::regclass""",
            (application, table),
        ).fetchone()

    def soon(predicate, what: str) -> None:
        # polled every 5 ms: the client must queue within migrate's first attempt (half of
        # deadlock_timeout), or migrate is between attempts and the client is not blocked
        deadline = time.monotonic() + 30
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.005)

    with (
        psycopg.connect(empty_db_dsn) as writer,
        psycopg.connect(empty_db_dsn, application_name="chat-client") as client,
        psycopg.connect(empty_db_dsn, autocommit=True) as watcher,
    ):
        writer.execute("lock table runlane.messages in row exclusive mode")
        client.execute("select count(*) from runlane.runs")  # ACCESS SHARE, kept
        thread = _migrate_in_background(empty_db_dsn, outcome, to=16, lock_timeout=30)
        soon(waiting("migrator", "runlane.messages"), "migrate to wait for messages")
        reader = threading.Thread(target=client_reads_messages, args=(client,), daemon=True)
        reader.start()
        soon(
            waiting("chat-client", "runlane.messages"),
            "the client to queue behind migrate on messages",
        )
        writer.commit()  # migrate takes messages and asks for runs, which the client holds
        reader.join(30)
        assert outcome.get("client") == "read", outcome.get("client")
        client.commit()
        thread.join(60)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["applied"] == [16]


def test_an_attempt_waits_first_for_the_lock_the_last_one_could_not_take(empty_db_dsn):
    """0016 locks messages, then runs. While a reader keeps runs, the first attempt takes
    messages and gives up on runs after STEP_LOCK_WAIT; every later attempt waits for runs
    first, holding nothing, so chat writes to messages are not stalled behind migrate
    while it waits (a worker holding runs that then asks for messages would be stuck
    behind it: the cycle that kept 0029 from applying under a chat load)."""
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        migrate(conn, to=15)
    outcome: dict[str, object] = {}

    def migrator_locks() -> dict[str, bool]:
        return dict(
            watcher.execute("""
            select l.relation::regclass::text, l.granted
            from pg_locks as l join pg_stat_activity as a on a.pid = l.pid
            where a.application_name = 'migrator' and l.locktype = 'relation'
              and l.relation in ('runlane.messages'::regclass, 'runlane.runs'::regclass)
            """).fetchall()
        )

    with (
        psycopg.connect(empty_db_dsn) as reader,
        psycopg.connect(empty_db_dsn, autocommit=True) as watcher,
    ):
        reader.execute("select count(*) from runlane.runs")  # ACCESS SHARE, kept
        thread = _migrate_in_background(empty_db_dsn, outcome, to=16, lock_timeout=30)
        wait_until(
            lambda: migrator_locks() == {"runlane.runs": False},
            what="migrate to wait for runs holding nothing on messages",
        )
        for _ in range(40):  # about 0.8 s: the later attempts, and the backoffs between
            time.sleep(0.02)
            assert "runlane.messages" not in migrator_locks()
        assert outcome == {}  # still trying, nothing applied
        reader.commit()
        thread.join(60)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["applied"] == [16]
