"""Apply runlane's numbered migrations, then (re)install the functions of HEAD.

Migrations (`sql/migrations/NNNN_name.sql`) are immutable: each is applied once in its
own transaction, recorded with its checksum in `runlane.schema_migrations` (the row is
written first, so two concurrent migrators clash on the primary key instead of applying
a file twice), and an edited file is refused. Function files (`sql/functions/**.sql`)
are `create or replace` and are re-applied on every run, so running twice changes
nothing.

Migrators exclude each other with a session advisory lock (MIGRATION_LOCK). It stays
advisory on purpose: it must exist before the schema does (the first migrate creates it),
and it protects nothing at run time. Any login can take that key too, which can only
block `runlane migrate`, never a worker or the API: so the wait is bounded
(`lock_timeout`, 60 s by default) and then fails with a MigrationError that names every
session holding the key (pid, user, application), for an operator to end
(`select pg_terminate_backend(pid)`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable

import psycopg

# Function files are HEAD code: they need at least the expand generation's columns.
FUNCTIONS_NEED_VERSION = 2
MIGRATION_LOCK = 7_317_001  # pg_advisory_lock key shared by all migrators
LOCK_TIMEOUT = 60.0  # seconds a migrator waits for MIGRATION_LOCK

HOLDERS = """
select l.pid, a.usename, a.application_name
from pg_locks as l
left join pg_stat_activity as a on a.pid = l.pid
where l.locktype = 'advisory' and l.granted and l.pid <> pg_backend_pid()
  and l.database = (select oid from pg_database where datname = current_database())
  and l.classid = 0 and l.objid = %s and l.objsubid = 1
order by l.pid
"""

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

BOOTSTRAP = """
create schema if not exists runlane;
create table if not exists runlane.schema_migrations (
    version int primary key,
    name text not null,
    checksum text not null,
    applied_at timestamptz not null default now()
);
"""


class MigrationError(Exception):
    """A migration cannot be applied as asked (edited file, unknown target, …)."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def sql_root() -> Traversable:
    return resources.files("runlane") / "sql"


def migrations() -> list[Migration]:
    found = []
    for entry in (sql_root() / "migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text()))
    return sorted(found, key=lambda m: m.version)


def _walk(node: Traversable):
    for entry in sorted(node.iterdir(), key=lambda e: e.name):
        if entry.is_dir():
            yield from _walk(entry)
        elif entry.name.endswith(".sql"):
            yield entry


def function_files() -> list[Traversable]:
    """Every function file, in a stable order: private helpers (`_x`) of an area first."""
    files = list(_walk(sql_root() / "functions"))
    return sorted(files, key=lambda e: (not e.name.startswith("_"), str(e)))


def applied_versions(conn: psycopg.Connection) -> dict[int, str]:
    with conn.cursor() as cur:
        cur.execute("select to_regclass('runlane.schema_migrations') is not null")
        if not cur.fetchone()[0]:
            return {}
        cur.execute("select version, checksum from runlane.schema_migrations")
        return dict(cur.fetchall())


def _take_migration_lock(conn: psycopg.Connection, lock_timeout: float) -> None:
    """MIGRATION_LOCK, waiting at most lock_timeout seconds; then a MigrationError that
    names the sessions holding it."""
    conn.execute("select set_config('lock_timeout', %s, false)",
                 (f"{max(1, int(lock_timeout * 1000))}ms",))
    try:
        conn.execute("select pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    except psycopg.errors.LockNotAvailable:
        holders = conn.execute(HOLDERS, (MIGRATION_LOCK,)).fetchall()
        who = ", ".join(f"pid {pid} (user {user!r}, application {app!r})"
                        for pid, user, app in holders) or "a session that has since ended"
        raise MigrationError(
            f"the migration lock (advisory key {MIGRATION_LOCK}) is held by {who}; "
            f"waited {lock_timeout:g} s. Another `runlane migrate` may be running; if not, "
            "end the holder with select pg_terminate_backend(pid) and retry") from None
    finally:
        conn.execute("reset lock_timeout")


def migrate(conn: psycopg.Connection, to: int | None = None,
            lock_timeout: float = LOCK_TIMEOUT) -> list[Migration]:
    """Apply pending migrations up to `to` (all when None); returns those applied.
    MigrationError when another session holds the migration lock for lock_timeout s."""
    known = migrations()
    if to is not None and to not in {m.version for m in known}:
        raise MigrationError(f"there is no migration {to:04d}; known: "
                             + ", ".join(f"{m.version:04d}" for m in known))
    conn.autocommit = True
    _take_migration_lock(conn, lock_timeout)
    try:
        conn.execute(BOOTSTRAP)
        done = applied_versions(conn)
        for m in known:
            if m.version in done and done[m.version] != m.checksum:
                raise MigrationError(
                    f"migration {m.version:04d}_{m.name} was edited after it was applied; "
                    "released migrations are immutable: add a new one instead")
        applied = []
        for m in known:
            if m.version in done or (to is not None and m.version > to):
                continue
            with conn.transaction():
                conn.execute(
                    "insert into runlane.schema_migrations (version, name, checksum) "
                    "values (%s, %s, %s)", (m.version, m.name, m.checksum))
                conn.execute(m.sql)
            applied.append(m)
        if max(applied_versions(conn), default=0) >= FUNCTIONS_NEED_VERSION:
            install_functions(conn)
        return applied
    finally:
        conn.execute("select pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


def install_functions(conn: psycopg.Connection) -> None:
    with conn.transaction():
        # Bodies may call functions from files applied later in this same pass.
        conn.execute("set local check_function_bodies = off")
        for entry in function_files():
            try:
                conn.execute(entry.read_text())
            except psycopg.Error as exc:
                raise MigrationError(f"{entry.name}: {exc}") from exc
