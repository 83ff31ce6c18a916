"""One throwaway PostgreSQL cluster per test session, a migrated template database, and
a fresh database cloned from it for every Python test. pgTAP files (tests/sql/test*.sql)
run through pytest-pgtap on one session connection; each file rolls itself back."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import psycopg
import pytest
from pytest_postgresql.janitor import DatabaseJanitor

from runlane.migrate import migrate
from runlane.pgcluster import SUPERUSER, LocalCluster

TEMPLATE = "runlane_template"
FIXTURES = Path(__file__).parent / "sql" / "fixtures"
_db_numbers = itertools.count()


@pytest.fixture(scope="session")
def pg_cluster():
    cluster = LocalCluster()
    cluster.start()
    yield cluster
    cluster.destroy()


def _janitor(
    cluster: LocalCluster, dbname: str, template: str | None = None, as_template: bool = False
) -> DatabaseJanitor:
    return DatabaseJanitor(
        user=SUPERUSER,
        host="127.0.0.1",
        port=cluster.port,
        dbname=dbname,
        template_dbname=template,
        as_template=as_template,
    )


def load_test_fixtures(conn: psycopg.Connection) -> None:
    """pgTAP and the runlane_test schema of fixture functions."""
    conn.execute("create extension if not exists pgtap schema public")
    conn.execute("create schema if not exists runlane_test")
    for path in sorted(FIXTURES.glob("*.sql")):
        conn.execute(path.read_text())


@pytest.fixture(scope="session")
def template_db(pg_cluster):
    janitor = _janitor(pg_cluster, TEMPLATE, as_template=True)
    janitor.init()
    with psycopg.connect(pg_cluster.dsn_for(TEMPLATE), autocommit=True) as conn:
        migrate(conn)
        load_test_fixtures(conn)
    yield TEMPLATE
    janitor.drop()


def new_database(cluster: LocalCluster, template: str | None) -> tuple[str, DatabaseJanitor]:
    name = f"t{os.getpid()}_{next(_db_numbers)}"
    janitor = _janitor(cluster, name, template=template)
    janitor.init()
    return cluster.dsn_for(name), janitor


@pytest.fixture
def db_dsn(pg_cluster, template_db):
    """A fresh, fully migrated database for one test."""
    dsn, janitor = new_database(pg_cluster, template_db)
    yield dsn
    janitor.drop()


@pytest.fixture
def empty_db_dsn(pg_cluster):
    """A fresh database with nothing in it (for migration tests)."""
    dsn, janitor = new_database(pg_cluster, None)
    yield dsn
    janitor.drop()


@pytest.fixture
def conn(db_dsn):
    with psycopg.connect(db_dsn, autocommit=True) as connection:
        yield connection


@pytest.fixture(scope="session")
def pgtap_connection(pg_cluster, template_db):
    """pytest-pgtap's connection: a migrated database shared by all .sql test files.

    Autovacuum is off for its tables: every file rolls back, so there is nothing to
    reclaim, and a vacuum or analyze landing between two files at a random moment would
    rewrite the table sizes the plan tests' estimates start from (an ANALYZE inside a
    file, rolled back, still leaves its pg_class sizes). The files then see the same
    starting state in every run."""
    dsn, janitor = new_database(pg_cluster, template_db)
    with psycopg.connect(dsn, autocommit=True) as setup:
        for (table,) in setup.execute(
            "select c.oid::regclass::text from pg_class as c "
            "where c.relnamespace = 'runlane'::regnamespace and c.relkind = 'r'"
        ).fetchall():
            setup.execute(f"alter table {table} set (autovacuum_enabled = false)")
    with psycopg.connect(dsn) as connection:
        yield connection
    janitor.drop()
