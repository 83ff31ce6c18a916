"""Properties of next_slot over random zones, schedules and instants across 2026-2028,
checked against PostgreSQL (the implementation) and Python's zoneinfo (an independent
model of the same rules: fold=0 is the first instance of an ambiguous wall time and reads
a nonexistent one with the offset before the gap)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ZONES = [
    "UTC",
    "Europe/Berlin",
    "Europe/London",
    "America/New_York",
    "America/St_Johns",
    "America/Santiago",
    "Australia/Lord_Howe",
    "Australia/Adelaide",
    "Asia/Kathmandu",
    "Asia/Tehran",
    "Pacific/Chatham",
    "Pacific/Auckland",
]
DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
START = datetime(2026, 1, 1, tzinfo=UTC)
END = datetime(2028, 12, 31, tzinfo=UTC)

NEXT = "select runlane.next_slot(%(s)s::text, %(tz)s::text, %(t)s::timestamptz)"

instants = st.integers(0, int((END - START).total_seconds())).map(
    lambda s: START + timedelta(seconds=s)
)
times = st.tuples(st.integers(0, 23), st.integers(0, 59))


def next_slot(conn, schedule: str, zone: str, after: datetime) -> datetime:
    return conn.execute(NEXT, {"s": schedule, "tz": zone, "t": after}).fetchone()[0]


def local_slot(day: date, hh: int, mm: int, zone: ZoneInfo) -> datetime:
    return datetime(day.year, day.month, day.day, hh, mm, tzinfo=zone, fold=0).astimezone(UTC)


def exists(day: date, hh: int, mm: int, zone: ZoneInfo) -> bool:
    wall = datetime(day.year, day.month, day.day, hh, mm, tzinfo=zone)
    return wall.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall.replace(tzinfo=None)


def model_next(hh: int, mm: int, days: list[int] | None, zone: ZoneInfo, after: datetime):
    first = after.astimezone(zone).date() - timedelta(days=1)
    for i in range(10):
        day = first + timedelta(days=i)
        if days is None or day.isoweekday() in days:
            slot = local_slot(day, hh, mm, zone)
            if slot > after:
                return slot, day
    raise AssertionError("no slot within ten days")


PROPERTY_SETTINGS = settings(
    derandomize=True,
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@PROPERTY_SETTINGS
@given(zone=st.sampled_from(ZONES), at=times, after=instants)
def test_daily_slots_fire_once_per_local_day_at_an_existing_wall_time(conn, zone, at, after):
    hh, mm = at
    schedule = f"daily at {hh:02d}:{mm:02d}"
    tz = ZoneInfo(zone)
    first = next_slot(conn, schedule, zone, after)
    second = next_slot(conn, schedule, zone, first)

    assert first > after, "the slot is strictly after its input"
    expected, day = model_next(hh, mm, None, tz, after)
    assert first == expected
    local = first.astimezone(tz)
    if exists(day, hh, mm, tz):
        assert (local.date(), local.hour, local.minute) == (day, hh, mm)
    else:
        assert local.replace(tzinfo=None) > datetime(day.year, day.month, day.day, hh, mm), (
            "a nonexistent wall time fires after the gap, never inside it"
        )
    # the slot is a real instant whose local rendering round-trips (not inside a gap)
    assert local.astimezone(UTC) == first
    assert second.astimezone(tz).date() == day + timedelta(days=1), (
        "the next daily slot is on the next local day: exactly one slot per day"
    )


@PROPERTY_SETTINGS
@given(
    zone=st.sampled_from(ZONES),
    at=times,
    after=instants,
    days=st.sets(st.integers(1, 7), min_size=1, max_size=7),
)
def test_weekly_slots_fall_on_the_chosen_local_days(conn, zone, at, after, days):
    hh, mm = at
    schedule = f"weekly on {','.join(DAYS[d - 1] for d in sorted(days))} at {hh:02d}:{mm:02d}"
    tz = ZoneInfo(zone)
    first = next_slot(conn, schedule, zone, after)
    assert first > after
    expected, day = model_next(hh, mm, sorted(days), tz, after)
    assert first == expected
    assert day.isoweekday() in days
    assert first - after <= timedelta(days=7, hours=2)


@PROPERTY_SETTINGS
@given(zone=st.sampled_from(ZONES), hours=st.integers(1, 720), after=instants)
def test_interval_slots_are_exactly_n_hours_apart(conn, zone, hours, after):
    schedule = "every hour" if hours == 1 else f"every {hours} hours"
    first = next_slot(conn, schedule, zone, after)
    second = next_slot(conn, schedule, zone, first)
    assert after < first <= after + timedelta(hours=hours)
    assert second - first == timedelta(hours=hours), "interval slots are exact elapsed hours"
