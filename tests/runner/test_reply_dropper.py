"""The soak's reply dropper (soak/reply_dropper.py): a loopback proxy that loses the reply
to a committed statement. The soak's lost-acknowledgement fault relies on three things
checked here against a real PostgreSQL: unarmed, it is transparent (also for prepared
statements); armed, the statement COMMITS and the client sees a broken connection; a
statement that fails is forwarded and the kind stays armed."""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `soak` sits beside `tests`, outside the installed package
    sys.path.insert(0, str(ROOT))

from soak.reply_dropper import ReplyDropper  # noqa: E402

# Named like the worker's statements (the dropper matches on the statement text).
CLAIMISH = (
    "insert into soak_t (run_id) values (%(run_id)s::bigint) "
    "returning run_id, 1 as fence, 1 as attempt -- runlane.claim_runs("
)


@pytest.fixture
def proxied(db_dsn):
    parts = urlsplit(db_dsn)
    dropper = ReplyDropper(upstream_port=parts.port, lifetime=60)
    port = dropper.start()
    dsn = (
        f"postgresql://{parts.username}@127.0.0.1:{port}{parts.path}"
        "?sslmode=prefer&application_name=soak-test"
    )
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("create table soak_t (run_id bigint)")
    try:
        yield dropper, dsn, db_dsn
    finally:
        dropper.close()


def _count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute("select count(*) from soak_t").fetchone()[0]


def test_unarmed_the_proxy_is_transparent_also_for_prepared_statements(proxied):
    dropper, dsn, direct = proxied
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=1) as conn:
        for i in range(10):  # prepared after the first: Bind names the statement
            row = conn.execute(CLAIMISH, {"run_id": i}).fetchone()
            assert row == (i, 1, 1)
    assert _count(direct) == 10
    assert dropper.drops == []


def test_an_armed_reply_is_lost_after_commit(proxied):
    dropper, dsn, direct = proxied
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=1) as conn:
        conn.execute(CLAIMISH, {"run_id": 1})
        conn.execute(CLAIMISH, {"run_id": 2})  # now a prepared statement
        dropper.arm("claim")
        with pytest.raises(psycopg.OperationalError):
            conn.execute(CLAIMISH, {"run_id": 42}).fetchone()
    assert _count(direct) == 3, "the statement whose reply was lost committed"
    assert [(d.kind, d.run_ids, d.fences, d.attempts, d.client) for d in dropper.drops] == [
        ("claim", [42], [1], [1], "soak-test")
    ]
    assert dropper.armed() == {}


def test_run_ids_come_from_the_bind_parameters_when_the_reply_has_none(proxied):
    dropper, dsn, direct = proxied
    dropper.arm("step")
    with psycopg.connect(dsn, autocommit=True) as conn, pytest.raises(psycopg.OperationalError):
        conn.execute(
            "select %s::bigint + %s::bigint "
            "-- runlane.save_checkpoint(p_run_id => $1, p_fence => $2)",
            (77, 3),
        )
    assert [(d.kind, d.run_ids, d.fences) for d in dropper.drops] == [("step", [77], [3])]


def test_a_failed_statement_is_forwarded_and_the_kind_stays_armed(proxied):
    dropper, dsn, direct = proxied
    dropper.arm("claim")
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("select 1 / 0 -- runlane.claim_runs(")
        assert conn.execute("select 5").fetchone() == (5,)  # connection still fine
    assert dropper.drops == []
    assert dropper.armed() == {"claim": 1}


def test_a_claim_that_claimed_nothing_is_forwarded_and_stays_armed(proxied):
    dropper, dsn, direct = proxied
    dropper.arm("claim")
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert (
            conn.execute("select run_id from soak_t where false -- runlane.claim_runs(").fetchall()
            == []
        )
    assert dropper.drops == []
    assert dropper.armed() == {"claim": 1}


def test_a_lost_output_batch_reply_names_the_runs_it_wrote_not_those_it_refused(proxied):
    dropper, dsn, direct = proxied
    dropper.arm("outputs")
    with psycopg.connect(dsn, autocommit=True) as conn, pytest.raises(psycopg.OperationalError):
        conn.execute(
            "select * from (values (5::bigint, 'applied'), (6, 'refused'), (7, 'resent')) "
            "as r (run_id, outcome) -- runlane.append_outputs("
        )
    assert [(d.kind, d.run_ids) for d in dropper.drops] == [("outputs", [5, 7])]
