"""Terminal tables for the demo and the operator commands.

Rich renders them when it is installed (unless RUNLANE_TABLES=plain); otherwise a plain
aligned table, so the commands work with the core dependencies alone. Cells go through
`cell()`: None is '-', datetimes ISO without microseconds, everything else str().
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any

try:  # optional: nicer tables when present
    from rich.console import Console
    from rich.table import Table

    RICH = True
except ImportError:  # pragma: no cover - depends on the environment
    RICH = False


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.replace(microsecond=0).isoformat()
    return str(value)


def render(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The table as text (a title line, a header, a rule, the rows)."""
    text_rows = [[cell(v) for v in row] for row in rows]
    if RICH and os.environ.get("RUNLANE_TABLES") != "plain":
        table = Table(title=title, title_justify="left")
        for name in columns:
            table.add_column(name)
        for row in text_rows:
            table.add_row(*row)
        console = Console(width=160, record=True, force_terminal=False, color_system=None)
        with console.capture() as capture:
            console.print(table)
        return capture.get().rstrip("\n")
    widths = [max([len(c)] + [len(r[i]) for r in text_rows]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    out = [title, line(columns), line(["-" * w for w in widths])]
    out += [line(r) for r in text_rows]
    if not text_rows:
        out.append("(none)")
    return "\n".join(out)
