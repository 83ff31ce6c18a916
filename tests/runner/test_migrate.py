"""`runlane migrate`: from zero, twice, staged, and refusing edited or unknown migrations
and a target older than the schema."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest

from runlane import migrate as migrate_module
from runlane.migrate import MigrationError, migrate


def schema_dump(dsn: str) -> str:
    from runlane.pgcluster import find_bindir

    out = subprocess.run(
        [str(find_bindir() / "pg_dump"), "--schema-only", "--schema=runlane", "--no-owner", dsn],
        check=True,
        capture_output=True,
        text=True,
    )
    # pg_dump 15.14+ brackets its output with a random \\restrict key.
    return "\n".join(
        line
        for line in out.stdout.splitlines()
        if not line.startswith(("\\restrict", "\\unrestrict"))
    )


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runlane", *args], capture_output=True, text=True)


def test_migrate_from_zero_applies_every_migration_in_order(empty_db_dsn):
    result = run_cli("migrate", "--dsn", empty_db_dsn)
    assert result.returncode == 0, result.stderr
    assert "applied 0001_queue_generation" in result.stdout
    assert result.stdout.index("0001") < result.stdout.index("0002") < result.stdout.index("0003")
    with psycopg.connect(empty_db_dsn) as conn:
        versions = [
            v
            for (v,) in conn.execute(
                "select version from runlane.schema_migrations order by version"
            )
        ]
    assert versions == [m.version for m in migrate_module.migrations()]


def test_migrating_twice_changes_nothing(empty_db_dsn):
    assert run_cli("migrate", "--dsn", empty_db_dsn).returncode == 0
    before = schema_dump(empty_db_dsn)
    second = run_cli("migrate", "--dsn", empty_db_dsn)
    assert second.returncode == 0, second.stderr
    assert "schema is up to date" in second.stdout
    assert schema_dump(empty_db_dsn) == before


def test_staged_upgrade_ends_in_the_same_schema_as_from_zero(empty_db_dsn, db_dsn):
    with psycopg.connect(empty_db_dsn) as conn:
        assert [m.version for m in migrate(conn, to=1)] == [1]
        assert [m.version for m in migrate(conn, to=2)] == [2]
        migrate(conn)
    assert schema_dump(empty_db_dsn) == schema_dump(db_dsn)


def test_only_the_queue_generation_has_no_head_functions(empty_db_dsn):
    with psycopg.connect(empty_db_dsn) as conn:
        migrate(conn, to=1)
        count = conn.execute(
            "select count(*) from pg_proc where pronamespace = 'runlane'::regnamespace"
        ).fetchone()[0]
    assert count == 0


def test_an_edited_migration_is_refused(empty_db_dsn, monkeypatch):
    with psycopg.connect(empty_db_dsn) as conn:
        migrate(conn, to=1)
    original = migrate_module.migrations

    def edited():
        found = original()
        first = found[0]
        return [
            migrate_module.Migration(first.version, first.name, first.sql + "\n-- edit"),
            *found[1:],
        ]

    monkeypatch.setattr(migrate_module, "migrations", edited)
    with psycopg.connect(empty_db_dsn) as conn, pytest.raises(MigrationError, match="edited"):
        migrate(conn)


def test_an_unknown_target_is_a_clear_error(empty_db_dsn):
    result = run_cli("migrate", "--dsn", empty_db_dsn, "--to", "42")
    assert result.returncode == 1
    assert "there is no migration 0042" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_older_target_on_a_newer_schema_says_so_and_changes_nothing(empty_db_dsn):
    with psycopg.connect(empty_db_dsn) as conn:
        migrate(conn, to=3)
    before = schema_dump(empty_db_dsn)
    result = run_cli("migrate", "--dsn", empty_db_dsn, "--to", "2")
    assert result.returncode == 1, result.stdout
    assert "the schema is at migration 0003, newer than the requested 0002" in result.stderr
    assert "migrations are never undone" in result.stderr
    assert "up to date" not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert schema_dump(empty_db_dsn) == before
    same = run_cli("migrate", "--dsn", empty_db_dsn, "--to", "3")
    assert same.returncode == 0, same.stderr
    assert "schema is up to date" in same.stdout


def test_head_locks_and_leadership_work_in_the_expand_stage_before_0005(empty_db_dsn):
    """HEAD functions run from `migrate --to 2` on (new workers of a rolling upgrade):
    without 0005's tables the thread lock and the leadership fall back to the advisory
    locks of old, and work."""
    with (
        psycopg.connect(empty_db_dsn, autocommit=True) as conn,
        psycopg.connect(empty_db_dsn, autocommit=True) as other,
    ):
        migrate(conn, to=2)
        assert conn.execute("select to_regclass('runlane.leader')").fetchone()[0] is None
        with conn.transaction():
            conn.execute("select runlane._thread_lock('agent-a', 'thread-1')")
        won = "select runlane.lead_maintenance(%s, interval '10 seconds')"
        assert conn.execute(won, ("w1",)).fetchone()[0] is True
        assert conn.execute(won, ("w1",)).fetchone()[0] is True  # renewal
        assert other.execute(won, ("w2",)).fetchone()[0] is False
        assert conn.execute("select runlane.resign_maintenance('w1')").fetchone()[0] is True
        assert other.execute(won, ("w2",)).fetchone()[0] is True
