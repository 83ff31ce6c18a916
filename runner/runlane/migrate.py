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

Each migration takes its table locks UP FRONT (`migration_locks`, `_apply`): before its
SQL runs, inside its transaction, it locks every existing runlane table it will touch in
the strongest mode it will need there, so no lock is upgraded in the middle of a
migration. An upgrade is what deadlocked 0012 under a write load: CREATE INDEX holds
SHARE on runs, a worker that has read runs waits on it to write, and DROP INDEX then
waits for ACCESS EXCLUSIVE behind the worker's read: a cycle.

Taking several locks one after another is itself a hold-and-wait, so one attempt is
shaped to give up fast and start again where it got stuck:
- It waits for its first lock at most SHORT_LOCK_WAIT, and at most half the server's
  `deadlock_timeout` (live workers queue behind a waiting request, so the wait is a stall
  of their writes and is kept short). It holds nothing else meanwhile.
- It waits for each further lock at most STEP_LOCK_WAIT. A worker transaction that holds
  one of them and then asks for a table the attempt already holds queues behind the
  attempt: a cycle that only the attempt's giving up ends. With 0029's eleven tables and
  a chat load, some worker transaction was in that state at almost every attempt, and
  attempts that waited out their whole SHORT_LOCK_WAIT on it failed for 20 s on end.
- The next attempt, after a backoff, waits first for the lock the last one could not
  take; the rest follow in sorted order.
The attempt's bound is on all its waits together, not on each lock, and it gives up
within half of `deadlock_timeout` of its start: a client queued behind one of its locks
checks for deadlock one `deadlock_timeout` after its own wait began, and by then every
lock is released (with one second per lock, such a client checked first and got 40P01:
0016 locks messages, then runs, under a chat load). A deadlock (40P01) or lock timeout
(55P03) raised by the migration's own statements (their waits are bounded the same way)
is retried like a failed attempt: the transaction rolled back, nothing was applied.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable

import psycopg

from .rows import one

# Function files are HEAD code: they need at least the expand generation's columns.
FUNCTIONS_NEED_VERSION = 2
MIGRATION_LOCK = 7_317_001  # pg_advisory_lock key shared by all migrators
LOCK_TIMEOUT = 60.0  # seconds a migrator waits for MIGRATION_LOCK, and per migration
SHORT_LOCK_WAIT = 1.0  # seconds one attempt waits for a migration's table locks, at most
STEP_LOCK_WAIT = 0.05  # seconds one attempt waits for each table lock after its first

HOLDERS = """
select l.pid, a.usename, a.application_name
from pg_locks as l
left join pg_stat_activity as a on a.pid = l.pid
where l.locktype = 'advisory' and l.granted and l.pid <> pg_backend_pid()
  and l.database = (select oid from pg_database where datname = current_database())
  and l.classid = 0 and l.objid = %s and l.objsubid = 1
order by l.pid
"""

TABLE_HOLDERS = """
select l.pid, a.usename, a.application_name, l.mode
from pg_locks as l
left join pg_stat_activity as a on a.pid = l.pid
where l.locktype = 'relation' and l.granted and l.pid <> pg_backend_pid()
  and l.database = (select oid from pg_database where datname = current_database())
  and l.relation = to_regclass(%s)
order by l.pid, l.mode
"""

INDEX_TABLE = """
select t.relname
from pg_catalog.pg_index as i
join pg_catalog.pg_class as c on c.oid = i.indexrelid
join pg_catalog.pg_class as t on t.oid = i.indrelid
join pg_catalog.pg_namespace as n on n.oid = c.relnamespace
where n.nspname = 'runlane' and c.relname = %s
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
        if not one(cur.fetchone())[0]:
            return {}
        cur.execute("select version, checksum from runlane.schema_migrations")
        return dict(cur.fetchall())


def _take_migration_lock(conn: psycopg.Connection, lock_timeout: float) -> None:
    """MIGRATION_LOCK, waiting at most lock_timeout seconds; then a MigrationError that
    names the sessions holding it."""
    conn.execute(
        "select set_config('lock_timeout', %s, false)", (f"{max(1, int(lock_timeout * 1000))}ms",)
    )
    try:
        conn.execute("select pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    except psycopg.errors.LockNotAvailable:
        holders = conn.execute(HOLDERS, (MIGRATION_LOCK,)).fetchall()
        who = (
            ", ".join(
                f"pid {pid} (user {user!r}, application {app!r})" for pid, user, app in holders
            )
            or "a session that has since ended"
        )
        raise MigrationError(
            f"the migration lock (advisory key {MIGRATION_LOCK}) is held by {who}; "
            f"waited {lock_timeout:g} s. Another `runlane migrate` may be running; if not, "
            "end the holder with select pg_terminate_backend(pid) and retry"
        ) from None
    finally:
        conn.execute("reset lock_timeout")


# -- the table locks a migration takes up front ------------------------------------------

# PostgreSQL's table lock modes and the modes each conflicts with (its documented table).
ACCESS_SHARE, ROW_SHARE, ROW_EXCLUSIVE = "access share", "row share", "row exclusive"
SHARE_UPDATE_EXCLUSIVE, SHARE = "share update exclusive", "share"
SHARE_ROW_EXCLUSIVE, EXCLUSIVE = "share row exclusive", "exclusive"
ACCESS_EXCLUSIVE = "access exclusive"
MODES = (
    ACCESS_SHARE,
    ROW_SHARE,
    ROW_EXCLUSIVE,
    SHARE_UPDATE_EXCLUSIVE,
    SHARE,
    SHARE_ROW_EXCLUSIVE,
    EXCLUSIVE,
    ACCESS_EXCLUSIVE,
)
_CONFLICTS = {
    ACCESS_SHARE: {ACCESS_EXCLUSIVE},
    ROW_SHARE: {EXCLUSIVE, ACCESS_EXCLUSIVE},
    ROW_EXCLUSIVE: {SHARE, SHARE_ROW_EXCLUSIVE, EXCLUSIVE, ACCESS_EXCLUSIVE},
    SHARE_UPDATE_EXCLUSIVE: {
        SHARE_UPDATE_EXCLUSIVE,
        SHARE,
        SHARE_ROW_EXCLUSIVE,
        EXCLUSIVE,
        ACCESS_EXCLUSIVE,
    },
    SHARE: {
        ROW_EXCLUSIVE,
        SHARE_UPDATE_EXCLUSIVE,
        SHARE_ROW_EXCLUSIVE,
        EXCLUSIVE,
        ACCESS_EXCLUSIVE,
    },
    SHARE_ROW_EXCLUSIVE: set(MODES[2:]),
    EXCLUSIVE: set(MODES[1:]),
    ACCESS_EXCLUSIVE: set(MODES),
}


def covering_mode(modes: set[str]) -> str:
    """The weakest mode that conflicts with everything any of `modes` conflicts with:
    holding it, this transaction can later take each of `modes` without waiting (no other
    session can hold anything they conflict with). SHARE + ROW EXCLUSIVE is SHARE ROW
    EXCLUSIVE, not the stronger of the two."""
    needed = set().union(*(_CONFLICTS[m] for m in modes))
    return next(m for m in MODES if _CONFLICTS[m] >= needed)


_IDENT = r"runlane\.([a-z_][a-z0-9_$]*)"
_LIST = rf"({_IDENT}(?:\s*,\s*{_IDENT})*)"
# (pattern, lock mode, what the captured names are) for the statement forms that lock an
# existing runlane table. Matched at the start of a top-level statement (lower-cased,
# whitespace folded); inside a DO block they are searched for anywhere in its body.
_FORMS: list[tuple[re.Pattern, str, str]] = [
    (
        re.compile(
            rf"create (?:unique )?index (?:concurrently )?(?:if not exists )?"
            rf"(?:[a-z_][a-z0-9_$]* )?on (?:only )?{_IDENT}"
        ),
        SHARE,
        "table",
    ),
    (re.compile(rf"alter table (?:if exists )?(?:only )?{_IDENT}"), ACCESS_EXCLUSIVE, "table"),
    (re.compile(rf"drop index (?:if exists )?{_LIST}"), ACCESS_EXCLUSIVE, "index"),
    # ALTER INDEX … RENAME takes SHARE UPDATE EXCLUSIVE on the index; counted on its table.
    (re.compile(rf"alter index (?:if exists )?{_IDENT} rename"), SHARE_UPDATE_EXCLUSIVE, "index"),
    (re.compile(rf"drop table (?:if exists )?{_LIST}"), ACCESS_EXCLUSIVE, "table"),
    (re.compile(rf"truncate (?:table )?(?:only )?{_LIST}"), ACCESS_EXCLUSIVE, "table"),
    # CREATE TRIGGER takes SHARE ROW EXCLUSIVE in PostgreSQL: ACCESS EXCLUSIVE is more
    # than it needs, and harmless for a migration that changes the table's behaviour.
    (
        re.compile(
            rf"create (?:or replace )?(?:constraint )?trigger [a-z_][a-z0-9_$]* "
            rf"[^;]*? on {_IDENT}"
        ),
        ACCESS_EXCLUSIVE,
        "table",
    ),
    (
        re.compile(rf"drop trigger (?:if exists )?[a-z_][a-z0-9_$]* on {_IDENT}"),
        ACCESS_EXCLUSIVE,
        "table",
    ),
    (
        re.compile(rf"lock (?:table )?(?:only )?{_LIST}(?: in ([a-z ]+?) mode)?(?: nowait)?$"),
        "",
        "table",
    ),  # the mode is the statement's own (ACCESS EXCLUSIVE when not given)
    (re.compile(rf"comment on (?:table|column) {_IDENT}"), SHARE_UPDATE_EXCLUSIVE, "table"),
    (re.compile(rf"insert into {_IDENT}"), ROW_EXCLUSIVE, "table"),
    (re.compile(rf"update (?:only )?{_IDENT}"), ROW_EXCLUSIVE, "table"),
    (re.compile(rf"delete from (?:only )?{_IDENT}"), ROW_EXCLUSIVE, "table"),
]
# A foreign key takes SHARE ROW EXCLUSIVE on the table it references.
_REFERENCES = re.compile(rf"\breferences {_IDENT}")
# Top-level statements that lock no existing table (beyond ACCESS SHARE reads, which
# conflict only with ACCESS EXCLUSIVE and so never with a worker): a new table (its
# foreign keys are found by _REFERENCES), a function body (not run by the migration),
# privileges, comments on other objects, roles and schemas.
_NEUTRAL = re.compile(
    r"(create (?:table|schema|role|type|sequence)|create (?:or replace )?(?:function|procedure)"
    r"|drop (?:function|procedure)|comment on (?!table |column )|grant |revoke )"
)
_LOCK_STATEMENT = re.compile(r"lock ")


def _split(sql: str) -> list[str]:
    """The statements of `sql` without their comments: `;` splits, except inside quotes,
    quoted identifiers and dollar quotes (kept verbatim)."""
    out: list[str] = []
    buf: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end
            continue
        if sql.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if sql.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif sql.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            buf.append(" ")
            continue
        c = sql[i]
        if c in "'\"":
            end = i + 1
            while end < n:
                if sql[end] == c and sql[end + 1 : end + 2] == c:
                    end += 2
                elif sql[end] == c:
                    break
                else:
                    end += 1
            buf.append(sql[i : end + 1])
            i = end + 1
            continue
        tag = (
            re.match(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$", sql[i:])
            if c == "$" and (i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] == "_"))
            else None
        )
        if tag:
            end = sql.find(tag[0], i + len(tag[0]))
            end = n if end < 0 else end + len(tag[0])
            buf.append(sql[i:end])
            i = end
            continue
        if c == ";":
            out.append("".join(buf).strip())
            buf = []
        else:
            buf.append(c)
        i += 1
    out.append("".join(buf).strip())
    return [s for s in out if s]


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


def _found(mode: str, kind: str, match: re.Match, locks: dict[tuple[str, str], set[str]]) -> None:
    names = re.findall(_IDENT, match[1]) or [match[1]]  # a list, or one bare name
    if mode == "":  # LOCK TABLE: the mode it names
        mode = match[match.re.groups] or ACCESS_EXCLUSIVE
        if mode not in MODES:
            raise MigrationError(f"unknown lock mode {mode!r} in: {match[0]}")
    for name in names:
        locks.setdefault((kind, name), set()).add(mode)


def migration_locks(sql: str) -> dict[tuple[str, str], set[str]] | None:
    """What `sql` locks: {("table" | "index", name in runlane): {modes}}, an index standing
    for its table (DROP INDEX). None when a statement cannot be classified: such a
    migration takes its locks as its statements come.
    Statements reached through function calls (a `select f()`, a DO block's PERFORM) are
    not followed; a DO block that runs dynamic SQL (EXECUTE) is not classified."""
    locks: dict[tuple[str, str], set[str]] = {}
    for raw in _split(sql):
        stmt = _fold(raw)
        for ref in _REFERENCES.finditer(stmt):
            if stmt.startswith(("create table", "alter table")):
                locks.setdefault(("table", ref[1]), set()).add(SHARE_ROW_EXCLUSIVE)
        if stmt.startswith("do "):
            body = re.search(r"(\$[a-z0-9_]*\$)(.*)\1", raw.lower(), re.S)
            # (EXECUTE runs dynamic SQL; a trigger's EXECUTE FUNCTION does not)
            if body is None or re.search(r"\bexecute\b(?!\s+(?:function|procedure)\b)", body[2]):
                return None
            for part in _split(body[2]):
                text = _fold(part)
                for form, mode, kind in _FORMS:
                    for match in form.finditer(text):
                        _found(mode, kind, match, locks)
            continue
        for form, mode, kind in _FORMS:
            head = form.match(stmt)
            if head:
                _found(mode, kind, head, locks)
                break
        else:
            if not _NEUTRAL.match(stmt):
                return None
    return locks


def planned_locks(conn: psycopg.Connection, m: Migration) -> list[tuple[str, str]] | None:
    """The locks `m` takes up front on this database: [(runlane.table, mode)] in the order
    taken (sorted by table), or None (`migration_locks`). Tables that do not exist (yet)
    and indexes that do not exist are left out: nobody else can hold a lock on them."""
    found = migration_locks(m.sql)
    if found is None:
        return None
    tables: dict[str, set[str]] = {}
    for (kind, name), modes in found.items():
        if kind == "index":
            row = conn.execute(INDEX_TABLE, (name,)).fetchone()
            if row is None:
                continue
            name = row[0]
        elif (
            one(conn.execute("select to_regclass(%s)", (f"runlane.{name}",)).fetchone())[0] is None
        ):
            continue
        tables.setdefault(name, set()).update(modes)
    return [(f"runlane.{name}", covering_mode(modes)) for name, modes in sorted(tables.items())]


def _holders(conn: psycopg.Connection, table: str) -> str:
    rows = conn.execute(TABLE_HOLDERS, (table,)).fetchall()
    by_pid: dict[int, tuple[str, str, list[str]]] = {}
    for pid, user, app, mode in rows:
        by_pid.setdefault(pid, (user, app, []))[2].append(mode)
    return (
        ", ".join(
            f"pid {pid} (user {user!r}, application {app!r}, {'/'.join(modes)})"
            for pid, (user, app, modes) in by_pid.items()
        )
        or "no session any more"
    )


def _attempt_wait(conn: psycopg.Connection) -> float:
    """Seconds one attempt may wait for its locks, all of them together: SHORT_LOCK_WAIT,
    and less than half the server's deadlock_timeout, so that the attempt gives up before
    a client queued behind one of its locks runs its own deadlock check (module doc)."""
    (deadlock_timeout,) = one(
        conn.execute(
            "select extract(epoch from current_setting('deadlock_timeout')::interval)::float8"
        ).fetchone()
    )
    return min(SHORT_LOCK_WAIT, deadlock_timeout / 2)


def _set_local_lock_timeout(conn: psycopg.Connection, seconds: float) -> None:
    """lock_timeout for the rest of this transaction: `seconds`, at least 1 ms (0 would
    mean no timeout at all)."""
    conn.execute(
        "select set_config('lock_timeout', %s, true)", (f"{max(1, int(seconds * 1000))}ms",)
    )


def _apply(
    conn: psycopg.Connection, m: Migration, lock_timeout: float, attempt_wait: float
) -> None:
    """Apply `m` in one transaction, its table locks taken first (planned_locks): the
    attempt waits attempt_wait seconds at most for all of them together, STEP_LOCK_WAIT
    for each after the first, and is retried with backoff until lock_timeout seconds are
    spent, each retry waiting first for the lock the last attempt could not take (module
    doc); a 40P01/55P03 of its own statements is retried the same way."""
    deadline = time.monotonic() + lock_timeout
    backoff = 0.05
    attempts = 0
    stuck_on: tuple[str, str] | None = None
    while True:
        attempts += 1
        started = time.monotonic()
        give_up = min(started + attempt_wait, deadline)
        waiting_for = None
        try:
            with conn.transaction():
                plan = planned_locks(conn, m)
                if plan is not None:
                    if stuck_on in plan:
                        plan = [stuck_on, *(lock for lock in plan if lock != stuck_on)]
                    for i, (table, mode) in enumerate(plan):
                        waiting_for = (table, mode)
                        # what is left of the attempt's wait, not a fresh one per lock
                        left = give_up - time.monotonic()
                        _set_local_lock_timeout(conn, left if i == 0 else min(left, STEP_LOCK_WAIT))
                        conn.execute(f"lock table {table} in {mode} mode")
                    waiting_for = None
                    # Also bounds the statements' own waits: a lock not planned for.
                    _set_local_lock_timeout(conn, attempt_wait)
                conn.execute(
                    "insert into runlane.schema_migrations (version, name, checksum) "
                    "values (%s, %s, %s)",
                    (m.version, m.name, m.checksum),
                )
                conn.execute(m.sql)
            return
        except (psycopg.errors.DeadlockDetected, psycopg.errors.LockNotAvailable) as exc:
            if waiting_for is not None:
                stuck_on = waiting_for
            left = deadline - time.monotonic()
            if left > 0:
                time.sleep(min(left, backoff * random.uniform(0.5, 1.0)))
                backoff = min(backoff * 2, SHORT_LOCK_WAIT)
                if time.monotonic() < deadline:
                    continue
            if waiting_for is not None:
                table, mode = waiting_for
                raise MigrationError(
                    f"migration {m.version:04d}_{m.name} could not lock {table} in {mode} "
                    f"mode in {lock_timeout:g} s ({attempts} attempts); sessions holding "
                    f"locks on it: {_holders(conn, table)}. Retry when they are done, or "
                    "give `runlane migrate --lock-timeout` more seconds"
                ) from None
            raise MigrationError(
                f"migration {m.version:04d}_{m.name} kept failing on a lock for "
                f"{lock_timeout:g} s ({attempts} attempts, last: {exc.sqlstate} "
                f"{exc.diag.message_primary}); nothing of it was applied: retry when the "
                "load is lower, or with a larger --lock-timeout"
            ) from None


def migrate(
    conn: psycopg.Connection, to: int | None = None, lock_timeout: float = LOCK_TIMEOUT
) -> list[Migration]:
    """Apply pending migrations up to `to` (all when None); returns those applied.
    MigrationError when another session holds the migration lock for lock_timeout s,
    when a migration cannot take its table locks within lock_timeout s (`_apply`), or
    when the schema is already past `to` (migrations are never undone: nothing is done)."""
    known = migrations()
    if to is not None and to not in {m.version for m in known}:
        raise MigrationError(
            f"there is no migration {to:04d}; known: "
            + ", ".join(f"{m.version:04d}" for m in known)
        )
    conn.autocommit = True
    _take_migration_lock(conn, lock_timeout)
    try:
        conn.execute(BOOTSTRAP)
        done = applied_versions(conn)
        for m in known:
            if m.version in done and done[m.version] != m.checksum:
                raise MigrationError(
                    f"migration {m.version:04d}_{m.name} was edited after it was applied; "
                    "released migrations are immutable: add a new one instead"
                )
        newest = max(done, default=0)
        if to is not None and newest > to:
            raise MigrationError(
                f"the schema is at migration {newest:04d}, newer than the requested {to:04d}: "
                "migrations are never undone, so nothing was changed (docs/upgrade.md says "
                "which older workers run on a newer schema)"
            )
        applied = []
        attempt_wait = _attempt_wait(conn)
        pending = [m for m in known if m.version not in done and (to is None or m.version <= to)]
        if pending and newest >= FUNCTIONS_NEED_VERSION:
            # The current functions first: they run on every schema from the expand step on,
            # so a session calling them meanwhile is served, and a migration can use them
            # (0029's triggers), instead of the earlier functions meeting a newer schema.
            install_functions(conn)
        for m in known:
            if m.version in done or (to is not None and m.version > to):
                continue
            _apply(conn, m, lock_timeout, attempt_wait)
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
                # (statement by statement: Citus propagates a function's DDL to the worker
                # nodes as the statement's text, and refuses several commands in one)
                for statement in _split(entry.read_text()):
                    conn.execute(statement)
            except psycopg.Error as exc:
                raise MigrationError(f"{entry.name}: {exc}") from exc
