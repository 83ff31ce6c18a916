"""Database errors as people read them: one line with the SQLSTATE, and an exit code."""

from __future__ import annotations

import psycopg

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


def exit_code(exc: psycopg.Error) -> int:
    """2 for a refusal the caller can act on (RLnnn), 1 for anything else."""
    return 2 if is_contract_error(exc) else 1
