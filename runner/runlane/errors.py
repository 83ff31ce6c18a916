"""Database errors as people read them: one line with the SQLSTATE, and an exit code."""

from __future__ import annotations

import getpass
import os
import re
import shlex

import psycopg
from psycopg.conninfo import conninfo_to_dict

# The contract's error codes (DESIGN.md): what each means to an operator.
CONTRACT_ERRORS = {
    "RL001": "lease lost (fenced out)",
    "RL002": "agent switched off by its owner",
    "RL003": "agent locked by an admin",
    "RL004": "agent has no model",
    "RL005": "weekly budget exhausted",
    "RL006": "invalid schedule",
    "RL007": "invalid timezone",
    "RL008": "unknown agent or run",
    "RL009": "contract migration refused",
}


def is_contract_error(exc: BaseException) -> bool:
    return isinstance(exc, psycopg.Error) and (exc.sqlstate or "").startswith("RL")


def describe(exc: psycopg.Error) -> str:
    """`RL006 invalid schedule: <message> (hint: …)` — never a traceback."""
    diag = exc.diag
    text = diag.message_primary or str(exc).strip()
    line = f"{exc.sqlstate or 'error'}: {text}"
    if diag.message_hint:
        line += f" (hint: {diag.message_hint})"
    return line


# The two roles a login is given (`runlane grant-login LOGIN --api|--worker`).
GRANT_FLAGS = {"runlane_api": "--api", "runlane_worker": "--worker"}


def login_of(dsn: str) -> str:
    """The login a DSN connects as, as libpq picks it: the DSN's user, $PGUSER, the OS user."""
    try:
        user = conninfo_to_dict(dsn).get("user")
    except psycopg.ProgrammingError:
        user = None
    return str(user or os.environ.get("PGUSER") or getpass.getuser())


def missing_role(exc: psycopg.Error, role: str, login: str, also: str | None = None) -> str | None:
    """For a permission refusal (42501) of a command that needs `role`: one line naming
    the role to grant and the command that grants it; None for any other error.
    `also` names a second role that would do as well (e.g. a worker reading the views)."""
    if exc.sqlstate != "42501" or "runlane grant-login" in (exc.diag.message_hint or ""):
        return None  # not a refusal, or one whose hint already says what to run
    either = f" (or {also})" if also else ""
    ident = (
        login
        if re.fullmatch(r"[a-z_][a-z0-9_$]*", login)
        else ('"' + login.replace('"', '""') + '"')
    )
    # an API login also needs this database's entry (runlane.scope_api_login)
    entry = (
        f" select runlane.scope_api_login('{login.replace(chr(39), chr(39) * 2)}', null);"
        if role == "runlane_api"
        else ""
    )
    return (
        f"login {login} may not do this: it needs the {role} role{either}. As the "
        f"schema owner or a superuser, run: runlane grant-login {shlex.quote(login)} "
        f"{GRANT_FLAGS[role]} (in SQL: grant {role} to {ident};{entry})"
    )


def exit_code(exc: psycopg.Error) -> int:
    """2 for a refusal the caller can act on (RLnnn), 1 for anything else."""
    return 2 if is_contract_error(exc) else 1
