"""plpgsql_check over every PL/pgSQL function in schema runlane (`make plpgsql-check`).

sqlfluff cannot see inside `$$` bodies; plpgsql_check can: it compiles each body against
the catalog and reports what would fail only when a branch runs (a missing column, a
wrong type, a misspelt variable) and what is dead (unused variables and parameters).

A throwaway cluster (runlane.pgcluster.LocalCluster), one database migrated to the head,
`create extension plpgsql_check`, then `plpgsql_check_function_tb` over each function, a
trigger function against each table it is attached to. Every finding (error, warning,
extra warning, security warning) fails the check unless EXCEPTIONS names it: the
function, a pattern matched against "message: detail", and why the finding is no fault.
An exception that matches nothing fails the check too, so the list only holds what is
true of the functions. Performance advice (volatility labels, implicit numeric casts) is
not asked for: a function's volatility is part of its contract, chosen on purpose.

Dev-only: this folder is outside runner/, so it never ships in the wheel.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass

import psycopg

from runlane.migrate import migrate
from runlane.pgcluster import LocalCluster


@dataclass(frozen=True)
class Allowed:
    function: str  # the function's name in schema runlane
    pattern: str  # a regular expression searched in "message: detail"
    why: str


EXCEPTIONS = [
    Allowed(
        "_notify_output",
        r'unused parameter "p_output_id"',
        # The signature is shared by append_output, finish_runs and _finish_runs_together,
        # and function files re-apply with `create or replace`: a new signature would leave
        # the old function beside the new one. The payload carries the stream token only.
        "parameter kept for the callers' signature",
    ),
    Allowed(
        "_finish_runs_together",
        r'unused variable "v_round"',
        # `for v_round in 1 .. 2` declares its own integer loop variable, which shadows the
        # declared one; the declared v_round is never read. Harmless.
        "integer FOR loop shadows the declaration",
    ),
    Allowed(
        "claim_runs",
        r"target type is different type than source type: "
        r'cast "text" value to "(integer|bigint|text)\[\]" type',
        # Array variables declared with a `'{}'` default (v_busy_orgs, v_busy_counts,
        # v_skipped): the literal goes through the array type's input, giving the empty
        # array of that type. Harmless.
        "untyped '{}' default of an array variable",
    ),
    # Citus's catalogs and functions exist only where Citus is installed: these functions
    # name them in dynamic SQL behind a to_regclass guard, which the check, run on plain
    # PostgreSQL, compiles anyway.
    Allowed(
        "_api_login",
        r'relation "pg_catalog.pg_dist_local_group" does not exist',
        "Citus's catalog, read only where it exists",
    ),
    Allowed(
        "_citus_node_without_logins",
        r'relation "pg_catalog.pg_dist_local_group" does not exist',
        "Citus's catalog, read only where it exists",
    ),
    Allowed(
        "_citus_distributed",
        r'relation "pg_catalog.pg_dist_partition" does not exist',
        "Citus's catalog, read only where it exists",
    ),
    Allowed(
        "org_node",
        r'relation "pg_catalog.pg_dist_partition" does not exist',
        "Citus's catalog, read only where it exists",
    ),
    Allowed(
        "org_node",
        r'unmodified OUT variable "(host|port)"',
        # set by RETURN QUERY EXECUTE, whose statement the check could not compile here
        "filled by the dynamic statement's rows",
    ),
    Allowed(
        "_local_shards",
        r'relation "pg_catalog.pg_dist_shard" does not exist',
        "Citus's catalog, read only where it exists",
    ),
    # The claim of a node reads this server's shards, whose names only Citus's catalog
    # holds: runlane._local_shards quotes each (format %I), and nothing a caller passes
    # reaches the statement's text.
    Allowed(
        "_claim_runs_of_node",
        r'relation "runlane.node_claim_receipts" does not exist',
        # each Citus worker node's own table (runlane migrate --citus); read only there
        "a worker node's table",
    ),
    Allowed(
        "_claim_runs_of_node",
        r'never read variable "(v_lanes|v_receipt_runs|v_receipt_fences)"',
        # read by the statements on that table, which the check cannot compile here
        "read by the statements on a worker node's table",
    ),
    Allowed(
        "_claim_runs_of_node",
        r"text type variable is not sanitized",
        "shard names from Citus's catalog, quoted",
    ),
    Allowed(
        "_run_orgs",
        r"dynamic EXECUTE statement is SQL injection secure",
        "shard names from Citus's catalog, quoted",
    ),
    Allowed(
        "scope_api_login",
        r"function pg_catalog.run_command_on_all_nodes\(text\) does not exist",
        "Citus's function, called only where it exists",
    ),
    Allowed(
        "scope_api_login",
        r'unused variable "(v_group|v_node_oid)"',
        # the loop over the dynamic statement sets and reads them; uncompiled here
        "the targets of a FOR over a dynamic statement",
    ),
]

FUNCTIONS = """
select p.oid, p.proname, p.oid::regprocedure::text as signature,
       coalesce(t.tgrelid, 0)::oid as relid, t.tgrelid::regclass::text as on_table
from pg_catalog.pg_proc as p
join pg_catalog.pg_namespace as n on n.oid = p.pronamespace
join pg_catalog.pg_language as l on l.oid = p.prolang
left join lateral (
    select distinct g.tgrelid from pg_catalog.pg_trigger as g where g.tgfoid = p.oid
) as t on true
where n.nspname = 'runlane' and l.lanname = 'plpgsql'
order by p.proname, p.oid, t.tgrelid
"""

CHECK = """
select level, lineno, sqlstate, message, detail
from plpgsql_check_function_tb(
    %(oid)s::oid::regprocedure, %(relid)s::oid::regclass,
    fatal_errors => false, other_warnings => true, extra_warnings => true,
    performance_warnings => false, security_warnings => true)
"""


def check(conn: psycopg.Connection) -> int:
    """Prints each finding; returns how many are faults (not excepted) plus how many
    exceptions matched nothing."""
    used: set[int] = set()
    faults = excepted = 0
    functions = conn.execute(FUNCTIONS).fetchall()
    for oid, name, signature, relid, on_table in functions:
        on = f" on {on_table}" if on_table else ""
        for level, lineno, sqlstate, message, detail in conn.execute(
            CHECK, {"oid": oid, "relid": relid}
        ).fetchall():
            text = f"{message}: {detail}" if detail else message
            where = f"{signature}{on}, line {lineno}" if lineno else f"{signature}{on}"
            match = next(
                (
                    i
                    for i, e in enumerate(EXCEPTIONS)
                    if e.function == name and re.search(e.pattern, text)
                ),
                None,
            )
            if match is None:
                faults += 1
                print(f"{level} {sqlstate}: {where}: {text}")
            else:
                used.add(match)
                excepted += 1
    stale = [e for i, e in enumerate(EXCEPTIONS) if i not in used]
    for e in stale:
        print(f"exception matches nothing (delete it from EXCEPTIONS): {e.function}: {e.pattern}")
    print(
        f"plpgsql_check: {len({f[0] for f in functions})} functions, {faults} findings, "
        f"{excepted} excepted, {len(stale)} stale exceptions"
    )
    return faults + len(stale)


def main() -> int:
    started = time.monotonic()
    with LocalCluster() as cluster, psycopg.connect(cluster.dsn, autocommit=True) as conn:
        migrate(conn)
        conn.execute("create extension plpgsql_check")
        failed = check(conn)
    print(f"plpgsql_check: {time.monotonic() - started:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
