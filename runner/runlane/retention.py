"""Retention: `runlane worker --retention 30d` makes the maintenance leader delete runs
that finished longer ago than that (`runlane.purge_finished`), with their outputs,
messages, charges and journal. Off by default: nothing is deleted unless asked.

The window is at least 8 days (the database refuses less), so every charge purged lies
before any owner's current week and weekly budgets stay exact."""

from __future__ import annotations

import re
from datetime import timedelta

MINIMUM = timedelta(days=8)
_SHORT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(w|d|h|m|s)\s*$", re.IGNORECASE)
_ISO = re.compile(
    r"^P(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)
_UNIT = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


def parse_window(text: str) -> timedelta:
    """'30d', '12h', '2w', '90m', '3600s' or ISO 8601 ('P30D', 'P1W', 'PT240H'); a window of
    at least 8 days, else ValueError with a message a person understands."""
    value = text.strip()
    short = _SHORT.match(value)
    if short:
        window = timedelta(**{_UNIT[short[2].lower()]: float(short[1])})
    else:
        iso = _ISO.match(value)
        if not iso or value.upper() in ("P", "PT") or value.upper().endswith("T"):
            raise ValueError(f"retention {text!r} is not a duration: use e.g. 30d, 240h or P30D")
        window = timedelta(**{_UNIT[k]: float(v) for k, v in iso.groupdict().items() if v})
    if window < MINIMUM:
        raise ValueError(
            f"retention {text!r} is shorter than 8 days: runs are kept at least "
            "8 days so weekly budgets stay exact"
        )
    return window
