"""The row of a statement that always returns one: a select without FROM, an aggregate
without GROUP BY, or a function that returns a single row."""

from __future__ import annotations

from typing import TypeVar

Row = TypeVar("Row")


def one(row: Row | None) -> Row:
    """`row` itself, typed as present; a missing row breaks the statement's contract."""
    if row is None:
        raise RuntimeError("a statement that always returns a row returned none")
    return row
