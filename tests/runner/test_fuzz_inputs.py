"""Bad input, tried as a hostile caller would, through the roles a caller really has.

Hypothesis (fixed seed, bounded examples) throws random unicode, NUL bytes, SQL
fragments, a 10 MB body, huge and negative limits and intervals at parse_schedule,
next_slot, submit_message and the limit-taking functions, and every public function
gets a null in each of its arguments in turn. The rule: every call either succeeds or
raises a documented SQLSTATE (the contract's RL001-RL008, or a data exception of bad
input) with a message a person can read; never an internal error, a type surprise from
inside our functions, or a bare P0001. Afterwards the database is consistent and every
row committed before the fuzzing is still there, unchanged.

NUL bytes: PostgreSQL text cannot hold U+0000. psycopg refuses such a parameter on the
client (psycopg.DataError, nothing sent), and a NUL smuggled in as bytes is refused by
the server while decoding (22021), before any function runs. Both are asserted as what
they are, with the database checked to hold no trace of the call.
"""

from __future__ import annotations

import hashlib
import json
import random
import string
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

# The contract's codes, and the data exceptions of bad input.
DOCUMENTED = {
    "RL001",
    "RL002",
    "RL003",
    "RL004",
    "RL005",
    "RL006",
    "RL007",
    "RL008",
    "RL010",  # an idempotency key already used for another request
    "23505",  # unique_violation: an agent or user id another organization holds
    "22004",  # null_value_not_allowed
    "22023",  # invalid_parameter_value
    "22021",  # character_not_in_repertoire (a NUL byte)
    "22P02",  # invalid_text_representation (a cast at the call boundary)
    "22008",  # datetime_field_overflow: only a cast at the call boundary ('2024-02-30')
    "22007",  # invalid_datetime_format
    "22015",  # interval_field_overflow
    "22P05",  # untranslatable_character: a \u0000 in JSON, refused as jsonb is read
    "55006",  # object_in_use: an erasure while a run of the object is unfinished
}


def fuzz_settings(examples: int) -> settings:
    """A fixed seed and a bounded number of examples: the same inputs on every run."""
    return settings(
        derandomize=True,
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


SQL_FRAGMENTS = [
    "'; drop table runlane.runs; --",
    "' or '1'='1",
    "$$; select pg_sleep(10); $$",
    "\\'; truncate runlane.messages cascade; --",
    "%s %(x)s {0} ${1}",
    "daily at 09:00'); delete from runlane.agents; --",
    "every 1 hours; select 1",
    "*/ select current_user /*",
    "E'\\x00'",
    "runlane.runs",
    "NULL",
    "DEFAULT",
    "every 0x10 hours",
    "weekly on mon,tue,wed at 9:00 union select 1",
    "daily at 24:00",
    "every 721 hours",
    "every -1 hours",
    "every 99999999999999999999 hours",
]


def weighted(*choices: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """One of the strategies, each drawn with its weight."""
    slots = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.integers(0, len(slots) - 1).flatmap(lambda i: slots[i])


# Every code point PostgreSQL can store (no surrogates: not Unicode scalar values).
unicode_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=80)
hostile_text = weighted(
    (4, unicode_text),
    (1, st.builds(lambda a, b: a + "\x00" + b, unicode_text, unicode_text)),  # a NUL byte
    (2, st.sampled_from(SQL_FRAGMENTS)),
    (
        2,
        st.builds(
            lambda a, f, b: a + f + b, unicode_text, st.sampled_from(SQL_FRAGMENTS), unicode_text
        ),
    ),
    (1, st.text(alphabet=string.printable, min_size=150, max_size=400)),
)

DAYS = [
    "mon",
    "tue",
    "wed",
    "thu",
    "fri",
    "sat",
    "sun",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
]


def _spaced(draw, text: str) -> str:
    """Random case and extra spacing, which parse_schedule must accept."""
    out = []
    for ch in text:
        out.append(ch.upper() if draw(st.booleans()) else ch)
        if ch == " " and draw(st.booleans()):
            out.append(draw(st.sampled_from([" ", "  ", "\t"])))
    pad = draw(st.sampled_from(["", " ", "  ", "\n"]))
    return pad + "".join(out) + pad


@st.composite
def valid_schedules(draw) -> tuple[str, str]:
    """(a schedule in a free form, its canonical text)."""
    kind = draw(st.sampled_from(["interval", "hour", "daily", "weekly"]))
    hh, mm = draw(st.integers(0, 23)), draw(st.integers(0, 59))
    time = f"{hh:02d}:{mm:02d}"
    if kind == "interval":
        n = draw(st.integers(2, 720))
        return _spaced(draw, f"every {n} hours"), f"every {n} hours"
    if kind == "hour":
        return _spaced(
            draw, draw(st.sampled_from(["every hour", "every 1 hours", "every 1 hour"]))
        ), "every hour"
    if kind == "daily":
        return _spaced(draw, f"daily at {hh}:{mm:02d}"), f"daily at {time}"
    days = draw(st.lists(st.sampled_from(DAYS), min_size=1, max_size=9))
    short = sorted({d[:3] for d in days}, key=DAYS.index)
    return _spaced(
        draw, f"weekly on {', '.join(days)} at {time}"
    ), f"weekly on {','.join(short)} at {time}"


schedule_inputs = weighted(
    (6, valid_schedules().map(lambda pair: pair[0])), (3, hostile_text), (1, st.just(""))
)


# --- calling as a hostile client -------------------------------------------------------


class Outcome:
    def __init__(self, rows=None, sqlstate=None, client_refused=False):
        self.rows, self.sqlstate, self.client_refused = rows, sqlstate, client_refused

    @property
    def ok(self) -> bool:
        return self.sqlstate is None and not self.client_refused


def has_nul(params) -> bool:
    values = params.values() if isinstance(params, dict) else (params or [])
    return any(isinstance(v, str) and "\x00" in v for v in values)


def short(params) -> str:
    text = repr(params)
    return text if len(text) <= 300 else f"{text[:300]}... ({len(text)} characters)"


def attempt(conn: psycopg.Connection, sql: str, params=None) -> Outcome:
    """One call, autocommitted. A failure must be documented and explained."""
    try:
        return Outcome(rows=conn.execute(sql, params).fetchall())
    except psycopg.Error as error:
        if error.sqlstate is None:
            # Refused by the driver before anything was sent: only a NUL byte may do that.
            assert has_nul(params) and "NUL" in str(error), f"{sql} {short(params)}: {error!r}"
            return Outcome(client_refused=True)
        assert error.sqlstate in DOCUMENTED, (
            f"{sql} with {short(params)} raised an undocumented {error.sqlstate}: {error}"
        )
        assert (error.diag.message_primary or "").strip(), f"{error.sqlstate} without a message"
        if error.sqlstate == "22008":  # never from inside runlane: instants are bounded
            assert "portal parameter" in (error.diag.context or ""), (
                f"{sql} with {short(params)} overflowed inside runlane: {error}"
            )
        return Outcome(sqlstate=error.sqlstate)


def incompressible_text(length: int) -> str:
    """CJK characters from a fixed seed: text that compression cannot shrink."""
    rng = random.Random(7)
    return "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(length))


def role_connection(dsn: str, role: str) -> psycopg.Connection:
    connection = psycopg.connect(dsn, autocommit=True)
    connection.execute(f"set role {role}")
    return connection


# --- what was committed before, and the invariants after ----------------------------

SNAPSHOT = {
    name: f"select to_jsonb(t) from {table} as t where {where} order by {order}"
    for name, table, where, order in [
        ("messages", "runlane.messages", "t.message_id = any(%(messages)s)", "t.message_id"),
        ("runs", "runlane.runs", "t.run_id = any(%(runs)s)", "t.run_id"),
        ("outputs", "runlane.run_outputs", "t.run_id = any(%(runs)s)", "t.output_id"),
        ("events", "runlane.run_events", "t.run_id = any(%(runs)s)", "t.event_id"),
        ("settings", "runlane.platform_settings", "t.org_id = 'org-fuzz'", "t.org_id"),
        ("users", "runlane.users", "t.org_id = 'org-fuzz'", "t.user_id"),
        ("agents", "runlane.agents", "t.agent_id = 'agent-known'", "t.agent_id"),
    ]
}

INVARIANTS = {
    "a message neither attached to a run nor held on a thread whose run is running": """
        select m.message_id from runlane.messages as m
        where m.run_id is null and not exists (
            select 1 from runlane.runs as r
            where r.agent_id = m.agent_id and r.thread_id = m.thread_id
              and r.lane = 'interactive' and r.state = 'running')""",
    "more than one unfinished interactive run on one thread": """
        select r.agent_id, r.thread_id from runlane.runs as r
        where r.lane = 'interactive' and r.state in ('queued', 'running')
        group by r.agent_id, r.thread_id having count(*) > 1""",
    "a running run without a lease": """
        select r.run_id from runlane.runs as r
        where r.state = 'running' and (r.lease_owner is null or r.lease_expires_at is null)""",
    "a computer lease held for a finished run": """
        select cl.computer_id from runlane.computer_leases as cl
        join runlane.runs as r on r.run_id = cl.run_id
        where r.state not in ('queued', 'running')""",
    "a run whose source message is attached elsewhere": """
        select r.run_id from runlane.runs as r
        join runlane.messages as m on m.message_id = r.source_message_id
        where m.run_id is distinct from r.run_id""",
    "a run whose cost is not the sum of its charges": """
        select r.run_id from runlane.runs as r
        where r.cost <> (select coalesce(sum(c.amount), 0) from runlane.charges as c
                         where c.run_id = r.run_id)""",
    "a spend bucket that is not the sum of its charges": """
        select b.owner_id, b.bucket_start from runlane.charge_buckets as b
        where b.amount <> (
            select coalesce(sum(c.amount), 0) from runlane.charges as c
            where c.owner_id = b.owner_id and c.charged_at >= b.bucket_start
              and c.charged_at < b.bucket_start + interval '15 minutes')""",
}


def commit_known_set(conn, api, worker) -> dict[str, list[int]]:
    """Finished chat runs with messages, outputs and journal, made through the roles."""
    conn.execute("select runlane_test.agent('agent-known', 'org-fuzz', 'computer-known')")
    messages, runs = [], []
    for i in range(4):
        message_id, run_id, _ = api.execute(
            "select * from runlane.submit_message('agent-known', %s, %s)",
            (f"known-{i}", f"known body {i} ✓"),
        ).fetchone()
        steering = api.execute(
            "select message_id from runlane.submit_message('agent-known', %s, 'and more')",
            (f"known-{i}",),
        ).fetchone()[0]
        messages += [message_id, steering]
        runs.append(run_id)
    for _ in range(len(runs)):
        claimed = worker.execute(
            "select run_id, fence from runlane.claim_runs('known-worker', array['interactive'], 1)"
        ).fetchall()
        for run_id, fence in claimed:
            worker.execute(
                "select runlane.append_output(%s, %s, 'text', 'an answer')", (run_id, fence)
            )
            worker.execute(
                "select runlane.finish_run(%s, %s, 'succeeded', null, 0.25)", (run_id, fence)
            )
    assert conn.execute(
        "select count(*) from runlane.runs where run_id = any(%s) and state = 'succeeded'", (runs,)
    ).fetchone()[0] == len(runs)
    return {"messages": messages, "runs": runs}


def snapshot(conn, known) -> dict[str, list]:
    return {name: conn.execute(sql, known).fetchall() for name, sql in SNAPSHOT.items()}


def assert_consistent(conn) -> None:
    violations = {name: conn.execute(sql).fetchall() for name, sql in INVARIANTS.items()}
    assert {name: rows for name, rows in violations.items() if rows} == {}


@pytest.fixture
def roles(conn, db_dsn):
    api = role_connection(db_dsn, "runlane_api")
    worker = role_connection(db_dsn, "runlane_worker")
    yield api, worker
    api.close()
    worker.close()


# --- the fuzzers ---------------------------------------------------------------------


def test_parse_schedule_accepts_free_forms_and_refuses_junk_cleanly(roles):
    api, _ = roles
    counts = {"ok": 0, "refused": 0}

    @fuzz_settings(300)
    @given(valid_schedules())
    def valid(pair):
        text, canonical = pair
        outcome = attempt(api, "select runlane.parse_schedule(%s::text)", (text,))
        assert outcome.ok, f"{text!r} is a valid schedule but raised {outcome.sqlstate}"
        spec = outcome.rows[0][0]
        assert spec["canonical"] == canonical
        again = attempt(api, "select runlane.parse_schedule(%s::text)", (canonical,))
        assert again.ok and again.rows[0][0] == spec, (
            "the canonical text parses to the same schedule"
        )

    @fuzz_settings(400)
    @given(hostile_text)
    def hostile(text):
        outcome = attempt(api, "select runlane.parse_schedule(%s::text)", (text,))
        if outcome.client_refused:
            counts["refused"] += 1
            return
        if outcome.ok:
            counts["ok"] += 1
            spec = outcome.rows[0][0]
            again = attempt(api, "select runlane.parse_schedule(%s::text)", (spec["canonical"],))
            assert again.ok and again.rows[0][0] == spec
        else:
            assert outcome.sqlstate == "RL006", f"{text!r}: {outcome.sqlstate}"

    valid()
    hostile()
    assert counts["refused"] > 0, "the fuzzer tried NUL bytes"
    assert attempt(api, "select runlane.parse_schedule(null::text)").sqlstate == "RL006"
    assert (
        attempt(api, "select runlane.parse_schedule(%s::text)", ("x" * 1_000_000,)).sqlstate
        == "RL006"
    )


def test_next_slot_is_strictly_after_and_within_one_period_or_refuses_cleanly(roles, conn):
    api, _ = roles
    zones = [
        row[0]
        for row in conn.execute("select name from pg_timezone_names order by name").fetchall()
    ]
    instants = weighted(
        (
            8,
            st.datetimes(
                min_value=datetime(1, 1, 2),
                max_value=datetime(9999, 12, 30),
                timezones=st.just(UTC),
            ).map(lambda d: d.isoformat()),
        ),
        (
            1,
            st.sampled_from(
                [
                    "infinity",
                    "-infinity",
                    "epoch",
                    "294276-12-31 23:59:59+00",
                    "4713-01-01 00:00:00+00 BC",
                    "2024-02-30 10:00",
                    "yesterday",
                    "now",
                ]
            ),
        ),
        (1, unicode_text),
    )
    seen = {"ok": 0, "errors": set()}

    @fuzz_settings(500)
    @given(schedule_inputs, weighted((8, st.sampled_from(zones)), (2, hostile_text)), instants)
    def fuzz(schedule, zone, after):
        outcome = attempt(
            api,
            "select s.slot::text, s.slot > s.after, extract(epoch from s.slot - s.after), "
            "runlane.parse_schedule(%(s)s::text) "
            "from (select runlane.next_slot(%(s)s::text, %(z)s::text, %(a)s::timestamptz) as slot, "
            "%(a)s::timestamptz as after) as s",
            {"s": schedule, "z": zone, "a": after},
        )
        if not outcome.ok:
            seen["errors"].add(outcome.sqlstate)
            return
        seen["ok"] += 1
        slot, later, gap, spec = outcome.rows[0]
        if spec["kind"] == "manual":
            assert slot is None
            return
        assert later, f"next_slot({schedule!r}, {zone!r}, {after!r}) = {slot} is not after it"
        # Exact hours for intervals; a day of margin for calendar slots, whose zone may
        # have moved its clocks (DST, or a historical change of offset) in between.
        period = {
            "interval": timedelta(hours=spec.get("hours", 1)),
            "daily": timedelta(days=2),
            "weekly": timedelta(days=8),
        }[spec["kind"]]
        assert gap <= period.total_seconds(), (
            f"next_slot({schedule!r}, {zone!r}, {after!r}) skipped a period: {gap}"
        )

    fuzz()
    assert seen["ok"] > 50, "the fuzzer reached real slots"
    assert {"RL006", "RL007"} <= seen["errors"], "the fuzzer tried bad schedules and zones"


def test_submit_message_stores_exactly_what_was_sent_or_refuses_cleanly(conn, roles):
    api, worker = roles
    known = commit_known_set(conn, api, worker)
    before = snapshot(conn, known)
    conn.execute("select runlane_test.agent('agent-fuzz', 'org-fuzz', 'computer-fuzz')")
    agents = weighted((8, st.sampled_from(["agent-fuzz", "agent-known"])), (1, hostile_text))
    threads = weighted(
        (6, st.sampled_from(["thread-1", "thread-2", "thread-3"])),
        (1, st.sampled_from(["known-0", " ", "", "\t"])),
        (3, hostile_text),
    )
    seen = {"created": 0, "steering": 0, "held": 0, "refused": 0, "errors": set()}

    def message_count():
        return conn.execute("select count(*) from runlane.messages").fetchone()[0]

    @fuzz_settings(300)
    @given(agents, threads, hostile_text, st.integers(0, 9))
    def fuzz(agent, thread, body, worker_move):
        count = message_count()
        outcome = attempt(
            api,
            "select * from runlane.submit_message(%s::text, %s::text, %s::text)",
            (agent, thread, body),
        )
        if not outcome.ok:
            if outcome.client_refused:
                seen["refused"] += 1
            else:
                seen["errors"].add(outcome.sqlstate)
            assert message_count() == count, "a refused submit wrote nothing"
            return
        ((message_id, run_id, disposition),) = outcome.rows
        seen[disposition] += 1
        stored = conn.execute(
            "select agent_id, thread_id, body, run_id from runlane.messages where message_id = %s",
            (message_id,),
        ).fetchone()
        assert stored[:3] == (agent, thread, body), "the message is stored exactly as sent"
        assert stored[3] == run_id
        if disposition == "created":
            assert (
                conn.execute(
                    "select source_message_id from runlane.runs where run_id = %s", (run_id,)
                ).fetchone()[0]
                == message_id
            )
        # A worker moves now and then, so threads have queued, running and finished runs.
        if worker_move == 0:
            attempt(
                worker, "select * from runlane.claim_runs('fuzz-worker', array['interactive'], 3)"
            )
        elif worker_move == 1:
            for run, fence in conn.execute(
                "select run_id, fence from runlane.runs where state = 'running' "
                "and lane = 'interactive' order by run_id limit 2"
            ).fetchall():
                attempt(worker, "select runlane.finish_run(%s, %s, 'succeeded')", (run, fence))

    fuzz()
    assert seen["created"] and seen["steering"] and seen["held"], seen
    assert seen["refused"] > 0 and {"RL008", "22023"} <= seen["errors"], seen

    # NUL smuggled as bytes past the driver: the server refuses it while decoding.
    count = message_count()
    outcome = attempt(
        api,
        "select * from runlane.submit_message('agent-fuzz', 'thread-1', "
        "convert_from(%s::bytea, 'UTF8'))",
        (b"before\x00after",),
    )
    assert outcome.sqlstate == "22021" and message_count() == count

    # A 10 MB body is refused with 22023 (the limit is 1 MB) and nothing is written.
    unit = "ünïcødé ✓ 🚀 "
    body = unit * (10 * 1024 * 1024 // len(unit.encode()) + 1)
    assert len(body.encode()) >= 10 * 1024 * 1024
    count = message_count()
    outcome = attempt(
        api, "select * from runlane.submit_message('agent-fuzz', 'thread-big', %s::text)", (body,)
    )
    assert outcome.sqlstate == "22023" and message_count() == count

    # A body of exactly 1 MB (multi-byte characters counted in bytes) is stored whole.
    body = (unit * (1024 * 1024 // len(unit.encode()) + 1)).encode()[: 1024 * 1024]
    body = body.decode(errors="ignore")
    body += "x" * (1024 * 1024 - len(body.encode()))
    assert len(body.encode()) == 1024 * 1024
    outcome = attempt(
        api, "select * from runlane.submit_message('agent-fuzz', 'thread-big', %s::text)", (body,)
    )
    assert outcome.ok
    digest = conn.execute(
        "select md5(body), octet_length(body) from runlane.messages where message_id = %s",
        (outcome.rows[0][0],),
    ).fetchone()
    assert digest == (hashlib.md5(body.encode()).hexdigest(), len(body.encode()))

    # A huge thread id is refused with a clear error, not an index-row-size failure.
    count = message_count()
    outcome = attempt(
        api,
        "select * from runlane.submit_message('agent-fuzz', %s::text, 'hi')",
        (incompressible_text(3000),),
    )
    assert outcome.sqlstate == "22023" and message_count() == count

    assert_consistent(conn)
    assert snapshot(conn, known) == before, "nothing committed before the fuzzing changed"


def test_limits_and_intervals_are_validated(conn, roles):
    api, worker = roles
    known = commit_known_set(conn, api, worker)
    before = snapshot(conn, known)
    conn.execute("select runlane_test.agent('agent-limits', 'org-limits', 'computer-limits')")
    conn.execute(
        "select runlane_test.scheduled_agent('agent-timer', 'weekly on mon,thu at 09:00', "
        "'Europe/Berlin', 'UTC', 'org-limits')"
    )
    for i in range(5):
        api.execute("select runlane.submit_message('agent-limits', %s, 'work')", (f"limit-{i}",))
    limits = st.one_of(
        st.integers(-(2**31), 2**31 - 1),
        st.sampled_from([-(2**31), -1, 0, 1, 2, 10_000, 10_001, 2**31 - 1]),
    )
    intervals = st.one_of(
        st.timedeltas(min_value=timedelta(days=-100_000), max_value=timedelta(days=100_000)),
        st.sampled_from(
            [
                timedelta(0),
                timedelta(microseconds=1),
                timedelta(microseconds=-1),
                timedelta(hours=1),
                timedelta(hours=1, microseconds=1),
            ]
        ),
    )
    instants = weighted(
        (
            9,
            st.datetimes(
                min_value=datetime(1900, 1, 1),
                max_value=datetime(3000, 1, 1),
                timezones=st.just(UTC),
            ),
        ),
        (1, st.sampled_from(["infinity", "-infinity"])),
    )
    calls = {
        "claim_runs": (
            worker,
            "select * from runlane.claim_runs('fuzz-worker', "
            "array['interactive', 'background'], %(limit)s::int, %(interval)s::interval)",
        ),
        "reap_stale": (
            worker,
            "select * from runlane.reap_stale(%(now)s::timestamptz, %(limit)s::int)",
        ),
        "outputs_since": (
            api,
            "select * from runlane.outputs_since(%(run)s::bigint, %(limit)s::bigint, "
            "%(limit)s::int)",
        ),
        "tick": (worker, "select * from runlane.tick(%(now)s::timestamptz, %(limit)s::int)"),
        "cancel_redundant_timer_runs": (
            worker,
            "select runlane.cancel_redundant_timer_runs(%(limit)s::int)",
        ),
        "heartbeat": (
            worker,
            "select runlane.heartbeat(%(run)s::bigint, 1, %(interval)s::interval)",
        ),
        "queue_delay": (
            worker,
            "select * from runlane.queue_delay(%(interval)s::interval, %(now)s::timestamptz)",
        ),
        # the dashboard's views: a window and an instant
        "lane_minutes": (
            api,
            "select * from runlane.lane_minutes(%(interval)s::interval, %(now)s::timestamptz)",
        ),
        "queue_delay_status": (
            api,
            "select * from runlane.queue_delay_status(%(interval)s::interval, "
            "%(now)s::timestamptz)",
        ),
        "owner_spend": (api, "select * from runlane.owner_spend(%(now)s::timestamptz)"),
        "lane_overview": (
            api,
            "select * from runlane.lane_overview(%(interval)s::interval, %(now)s::timestamptz)",
        ),
        "agent_page": (api, "select * from runlane.agent_page(null, %(limit)s::int)"),
        "runs_page": (
            api,
            "select * from runlane.runs_page(null, null, null, null, null, %(limit)s::int, "
            "%(interval)s::interval, %(now)s::timestamptz)",
        ),
        "failure_minutes": (
            api,
            "select * from runlane.failure_minutes(%(interval)s::interval, %(now)s::timestamptz)",
        ),
        "drain_legacy_deliveries": (
            worker,
            "select runlane.drain_legacy_deliveries(%(limit)s::int)",
        ),
        "purge_finished": (
            worker,
            "select runlane.purge_finished(%(interval)s::interval + interval '8 days', "
            "%(limit)s::int)",
        ),
    }
    negative_accepted = []
    tried = {name: 0 for name in calls}

    @fuzz_settings(400)
    @given(st.sampled_from(sorted(calls)), limits, intervals, instants)
    def fuzz(name, limit, interval, now):
        connection, sql = calls[name]
        tried[name] += 1
        run = known["runs"][0]
        outcome = attempt(
            connection, sql, {"limit": limit, "interval": interval, "now": now, "run": run}
        )
        if limit < 0 and "%(limit)s" in sql and outcome.ok:
            negative_accepted.append((name, limit))

    fuzz()
    assert all(tried.values()), tried
    assert negative_accepted == [], "a negative limit is refused with 22023"

    # Out of the int range: the cast at the call boundary refuses it, before any function.
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        worker.execute(
            "select * from runlane.claim_runs('w', array['interactive'], %s::int)", (2**40,)
        )

    assert_consistent(conn)
    assert snapshot(conn, known) == before, "nothing committed before the fuzzing changed"


def test_wake_times_are_bounded(conn, roles):
    """An infinite or far wake time would park a run for ever: its thread (every later
    message steers into it) or its agent (one unfinished background run per agent). Wake
    times are within one year of now; anything else is 22023."""
    api, _ = roles
    conn.execute("select runlane_test.agent('agent-wake', 'org-wake')")
    _, run_id, _ = api.execute(
        "select * from runlane.submit_message('agent-wake', 'thread-wake', 'hi')"
    ).fetchone()
    for wake in (
        "infinity",
        "-infinity",
        "294276-12-31 23:59:59+00",
        "4713-01-01 00:00+00 BC",
        datetime.now(UTC) + timedelta(days=367),
        datetime.now(UTC) - timedelta(days=367),
    ):
        outcome = attempt(api, "select runlane.publish_run(%s, %s::timestamptz)", (run_id, wake))
        assert outcome.sqlstate == "22023", f"publish_run with wake time {wake}"
        assert conn.execute(
            "select wake_at from runlane.runs where run_id = %s", (run_id,)
        ).fetchone() == (None,)
        outcome = attempt(
            api, "select runlane.create_run('agent-wake', 'manual', null, %s::timestamptz)", (wake,)
        )
        assert outcome.sqlstate == "22023", f"create_run with wake time {wake}"
        assert conn.execute(
            "select count(*) from runlane.runs where agent_id = 'agent-wake' "
            "and lane = 'background'"
        ).fetchone() == (0,)


def test_charge_refuses_bad_values_in_every_argument_and_writes_nothing(conn, roles):
    """charge(run, fence, amount): a null, an unknown run, a stale or foreign fence, a
    negative, NaN, infinite or non-numeric amount are each refused with a documented code,
    and only accepted charges reach the ledger and runs.cost."""
    _, worker = roles
    conn.execute("select runlane_test.agent('agent-charge', 'org-charge')")
    conn.execute("select runlane_test.queued_run('agent-charge', 'background', 'manual')")
    run_id, fence = worker.execute(
        "select run_id, fence from runlane.claim_runs('charge-worker', array['background'])"
    ).fetchone()
    accepted: list[Decimal] = []
    sql = "select runlane.charge(%s::bigint, %s::bigint, %s::numeric)"

    def charge(run, fen, amount, expect):
        outcome = attempt(worker, sql, (run, fen, amount))
        wanted = {expect} if isinstance(expect, str) else set(expect)
        assert (outcome.sqlstate or "ok") in wanted, (run, fen, amount, outcome.sqlstate)
        if outcome.ok and Decimal(str(amount)) > 0:
            accepted.append(Decimal(str(amount)))

    for bad_run, expect in [
        (None, "22004"),
        (0, "RL008"),
        (-1, "RL008"),
        (2**63 - 1, "RL008"),
        (run_id + 1000, "RL008"),
    ]:
        charge(bad_run, fence, 1, expect)
    for bad_fence, expect in [
        (None, "22004"),
        (-1, "RL001"),
        (0, "RL001"),
        (fence + 1, "RL001"),
        (2**63 - 1, "RL001"),
    ]:
        charge(run_id, bad_fence, 1, expect)
    for bad_amount, expect in [
        (None, "22004"),
        ("NaN", "22023"),
        ("Infinity", "22023"),
        ("-Infinity", "22023"),
        (-1, "22023"),
        ("-0.000000000000000001", "22023"),
        ("12abc", "22P02"),
        ("", "22P02"),
        (float("nan"), "22023"),
        (float("inf"), "22023"),
        (float("-inf"), "22023"),
    ]:
        charge(run_id, fence, bad_amount, expect)

    @fuzz_settings(150)
    @given(
        st.one_of(
            st.decimals(allow_nan=False, allow_infinity=False, min_value=-(10**6), max_value=10**6),
            st.decimals(allow_nan=True, allow_infinity=True),
            st.floats(allow_nan=True, allow_infinity=True),
            st.integers(-(10**30), 10**30),
        )
    )
    def fuzz(amount):
        if isinstance(amount, Decimal):
            finite = amount.is_finite()
        else:
            finite = amount == amount and amount not in (float("inf"), float("-inf"))
        if finite and amount != 0 and abs(Decimal(str(amount)).adjusted()) > 1000:
            return  # beyond numeric's exponent range: refused by the cast, not ours
        expect = "ok" if finite and 0 <= Decimal(str(amount)) <= 10**12 else "22023"
        if isinstance(amount, Decimal) and amount.is_nan():
            expect = ("22023", "22P02")  # -NaN: PostgreSQL's numeric input refuses the spelling
        charge(run_id, fence, amount, expect)

    fuzz()
    total = conn.execute(
        "select coalesce(sum(amount), 0), count(*) from runlane.charges where run_id = %s",
        (run_id,),
    ).fetchone()
    # Exactly the accepted calls wrote a row (floats reach numeric through float8, so
    # amounts are compared by the database's own sums, below and in the invariants).
    assert total[1] == len(accepted)
    assert (
        conn.execute("select cost from runlane.runs where run_id = %s", (run_id,)).fetchone()[0]
        == total[0]
    )


# Every Unicode whitespace character Python knows, plus invisible ones.
BLANKS = [c for c in map(chr, range(0x110000)) if c.isspace()] + ["\u200b", "\ufeff", "\x01"]


def test_costs_ids_and_zones_are_bounded(conn, roles):
    """A cost is finite and within [0, 1e12]; an id is 1..256 characters and not only
    whitespace; a zone is a name of pg_timezone_names. Everything else is refused with
    22023 (RL007 for zones) and writes nothing."""
    api, worker = roles
    conn.execute("select runlane_test.agent('agent-bound', 'org-bound')")
    _, run_id, _ = api.execute(
        "select * from runlane.submit_message('agent-bound', 'thread-bound', 'hi')"
    ).fetchone()
    ((claimed, fence),) = worker.execute(
        "select run_id, fence from runlane.claim_runs('bound-worker', array['interactive'])"
    ).fetchall()
    assert claimed == run_id
    costs = weighted(
        (6, st.decimals(allow_nan=True, allow_infinity=True)),
        (2, st.decimals(min_value=0, max_value=10**12, places=4)),
        (
            2,
            st.sampled_from(
                [
                    "NaN",
                    "Infinity",
                    "-Infinity",
                    "1e12",
                    "1000000000000.0001",
                    "-0.0001",
                    "0",
                    "1e-100",
                    "1e300",
                ]
            ),
        ),
    )
    seen = {"ok": 0, "refused": 0}

    @fuzz_settings(200)
    @given(costs)
    def cost(value):
        value = Decimal(value)
        # Each finish alone: rolled back, so the run stays running for the next one.
        with worker.transaction(force_rollback=True):
            outcome = attempt(
                worker,
                "select runlane.finish_run(%s, %s, 'succeeded', null, %s::numeric)",
                (run_id, fence, "NaN" if value.is_nan() else str(value)),  # no -NaN, sNaN
            )
        sensible = value.is_finite() and 0 <= value <= 10**12
        if sensible:
            assert outcome.ok, f"cost {value} is a charge but raised {outcome.sqlstate}"
            seen["ok"] += 1
        else:
            assert outcome.sqlstate == "22023", f"cost {value} gave {outcome.sqlstate}"
            seen["refused"] += 1

    cost()
    assert seen["ok"] and seen["refused"], seen

    blanks = st.text(alphabet=st.sampled_from(BLANKS), max_size=12)
    too_long = st.text(
        alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
        min_size=257,
        max_size=600,
    )

    @fuzz_settings(150)
    @given(weighted((3, blanks), (1, too_long)))
    def ids(value):
        count = conn.execute("select count(*) from runlane.messages").fetchone()[0]
        outcome = attempt(
            api, "select * from runlane.submit_message('agent-bound', %s::text, 'hi')", (value,)
        )
        assert outcome.sqlstate == "22023", f"thread id {value!r}: {outcome.sqlstate}"
        assert conn.execute("select count(*) from runlane.messages").fetchone()[0] == count
        outcome = attempt(
            worker, "select * from runlane.claim_runs(%s::text, array['interactive'])", (value,)
        )
        assert outcome.sqlstate == "22023", f"worker id {value!r}: {outcome.sqlstate}"

    ids()

    names = {row[0] for row in conn.execute("select name from pg_timezone_names").fetchall()}
    abbreviations = sorted(
        row[0]
        for row in conn.execute("select abbrev from pg_timezone_abbrevs").fetchall()
        if row[0] not in names
    )
    posix = [
        f"{zone}{sign}{hours}"
        for zone in ("UTC", "GMT", "XYZ", "<+03>")
        for sign in "+-"
        for hours in (1, 3, 12)
    ]

    @fuzz_settings(150)
    @given(st.sampled_from(abbreviations + [p for p in posix if p not in names]))
    def zones(zone):
        outcome = attempt(
            api, "select runlane.next_slot('daily at 09:00', %s::text, now())", (zone,)
        )
        assert outcome.sqlstate == "RL007", f"next_slot took {zone!r}: {outcome.sqlstate}"

    zones()
    assert "CEST" in abbreviations and "UTC+3" in posix
    assert conn.execute(
        "select runlane.weekly_spend(owner_id) = 'NaN'::numeric from runlane.agents "
        "where agent_id = 'agent-bound'"
    ).fetchone() == (False,)
    assert_consistent(conn)


# --- a null in every argument of every public function -------------------------------


def _sample_values(conn, api, worker) -> dict[str, object]:
    conn.execute("select runlane_test.agent('agent-null', 'org-null', 'computer-null')")
    message_id, run_id, _ = api.execute(
        "select * from runlane.submit_message('agent-null', 'thread-null', 'hello')"
    ).fetchone()
    api.execute("select runlane.submit_message('agent-null', 'thread-null', 'held')")
    claimed = worker.execute(
        "select run_id, fence from runlane.claim_runs('null-worker', array['interactive'])"
    ).fetchall()
    assert [r[0] for r in claimed] == [run_id]
    fence = claimed[0][1]
    worker.execute("select runlane.append_output(%s, %s, 'text', 'hi')", (run_id, fence))
    owner = conn.execute(
        "select owner_id from runlane.agents where agent_id = 'agent-null'"
    ).fetchone()[0]
    return {
        "p_agent_id": "agent-null",
        "p_thread_id": "thread-null",
        "p_body": "hello",
        "p_run_id": run_id,
        "p_fence": fence,
        "p_wake_at": datetime.now(UTC) + timedelta(minutes=5),
        "p_trigger": "manual",
        "p_prompt": "do it",
        "p_worker": "null-worker",
        "p_lanes": ["interactive"],
        "p_limit": 5,
        "p_lease": timedelta(seconds=60),
        "p_after_output_id": 0,
        "p_kind": "text",
        "p_checkpoint": Jsonb({"step": 1}),
        "p_outcome": "succeeded",
        "p_error": "boom",
        "p_cost": 0,
        "p_amount": Decimal("1.5"),
        "p_reason": "shutdown",
        "p_delay": timedelta(seconds=1),
        "p_now": datetime.now(UTC),
        "p_threshold": timedelta(seconds=30),
        "p_older_than": timedelta(days=30),  # purge_finished and the other retention calls
        "p_after_agent_id": "agent-null",  # purge_empty_threads: the sweep's key
        "p_after_thread_id": "thread-null",
        "p_owner_id": owner,
        "p_schedule": "daily at 09:00",
        "p_timezone": "UTC",
        "p_after": datetime.now(UTC),
        "p_worker_id": "null-worker",
        "p_stopped": False,
        "p_since": timedelta(hours=1),
        "p_queued": [1, 0],  # lane_minutes: lane_overview's queued counts
        "p_ttl": timedelta(seconds=15),  # lead_maintenance
        # the batched worker calls (run_messages_many, finish_runs)
        "p_run_ids": [run_id],
        "p_after_output_ids": [0],  # outputs_since_many: one cursor per run
        "p_fences": [fence],
        "p_outcomes": ["succeeded"],
        "p_errors": [None],
        "p_costs": [0],
        "p_output_counts": [1],
        "p_output_kinds": ["text"],
        "p_output_bodies": ["hi"],
        "p_kinds": ["text"],  # append_outputs
        "p_bodies": ["hi"],
        # the resend-safe forms (write sequence numbers, claim keys)
        "p_seq": 5,
        "p_seqs": [5],
        "p_claim_key": uuid.UUID("00000000-0000-4000-8000-000000000005"),
        "p_report_skipped": True,  # the worker's claim: reports runs a closed gate skipped
        "p_handlers": ["default"],  # the handlers a worker serves (claim, registry)
        "p_host": "host-null",  # the registry's host and process
        "p_pid": 4242,
        # management (put_org, put_user, put_agent)
        "p_org_id": "org-null",
        "p_user_id": "user-null",
        "p_patch": Jsonb({}),
        "p_idempotency_key": "key-null",  # the keyed submit_message and run_now
        "p_message_id": message_id,  # message_status
        # the dashboard's page of agents (agent_page)
        "p_from": "agent-null",
        "p_match": "null",
        "p_status": "manual",
        # the dashboard's runs page (runs_page)
        "p_state": "failed",
        "p_lane": "interactive",
    }


PUBLIC_FUNCTIONS = """
select p.proname,
       coalesce(p.proargnames[1:p.pronargs], '{}'),
       array(select format_type(t, null) from unnest(p.proargtypes) as t),
       has_function_privilege('runlane_api', p.oid, 'execute')
from pg_proc as p
where p.pronamespace = 'runlane'::regnamespace
  and (has_function_privilege('runlane_api', p.oid, 'execute')
       or has_function_privilege('runlane_worker', p.oid, 'execute'))
order by p.proname
"""


def test_a_null_in_any_argument_of_any_public_function_is_refused_clearly_or_harmless(conn, roles):
    api, worker = roles
    samples = _sample_values(conn, api, worker)
    functions = conn.execute(PUBLIC_FUNCTIONS).fetchall()
    assert len(functions) >= 20
    unknown = sorted({n for _, names, _, _ in functions for n in names} - samples.keys())
    assert unknown == [], "give these parameters a sample value"
    outcomes = {}
    for name, arg_names, arg_types, for_api in functions:
        connection = api if for_api else worker
        call_args = ", ".join(
            f"{n} => %({n})s::{t}" for n, t in zip(arg_names, arg_types, strict=True)
        )
        sql = f"select * from runlane.{name}({call_args})"
        for nulled in [None, *arg_names]:
            params = {n: (None if n == nulled else samples[n]) for n in arg_names}
            # Each call alone: whatever it wrote is rolled back before the next one.
            with connection.transaction(force_rollback=True):
                outcome = attempt(connection, sql, params)
            outcomes[(name, nulled)] = outcome.sqlstate or "ok"
    assert outcomes[("submit_message", "p_body")] == "22004"
    assert outcomes[("submit_message", "p_idempotency_key")] == "22004"
    assert outcomes[("send_message", "p_body")] == "22004"
    assert outcomes[("send_message", "p_idempotency_key")] == "ok"  # no key: the unkeyed form
    assert outcomes[("run_now", "p_idempotency_key")] == "22004"
    assert outcomes[("claim_runs", "p_limit")] == "22023"
    assert outcomes[("run_detail", None)] == "ok"
    assert outcomes[("run_detail", "p_run_id")] == "22004"
    assert [outcomes[("outputs_since_many", n)] for n in (None, "p_run_ids")] == ["ok", "22004"]
    # a page of agents: no start, no text filter or no status filter is every agent
    assert [outcomes[("agent_page", n)] for n in (None, "p_from", "p_match", "p_status")] == [
        "ok"
    ] * 4
    assert outcomes[("agent_page", "p_limit")] == "22004"
    assert outcomes[("lane_overview", "p_threshold")] == "22004"
    # erasure: the sample agent's chat run is running (55006), the sample user is nobody
    assert [outcomes[(n, None)] for n in ("erase_thread", "erase_agent", "erase_org")] == [
        "55006"
    ] * 3
    assert outcomes[("erase_user", None)] == "RL008"
    assert {outcomes[(n, a)] for n, a in outcomes if n.startswith("erase_") and a} == {"22004"}
    assert sum(1 for state in outcomes.values() if state == "ok") > 10
    assert_consistent(conn)


# --- management, run ids, idempotency keys and the operator views --------------------

AGENT_KEYS = [
    "org_id",
    "owner_id",
    "model",
    "prompt",
    "thread_id",
    "computer_id",
    "schedule",
    "enabled",
    "admin_locked",
    "handler",
]
ORG_KEYS = ["timezone", "agent_max_concurrency", "agent_iteration_cap", "agent_weekly_budget"]
# Numbers JSON can spell and Python's json writes: huge, tiny, negative, fractional.
json_numbers = st.one_of(
    st.integers(-(10**400), 10**400),
    st.sampled_from(
        [
            0,
            -1,
            1,
            2**31 - 1,
            2**31,
            2**63,
            10**12,
            10**12 + 1,
            0.5,
            -0.0,
            1e-300,
            1.7976931348623157e308,
            4.9e-324,
        ]
    ),
    st.floats(allow_nan=False, allow_infinity=False),
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    json_numbers,
    hostile_text,
    st.sampled_from(
        [
            "UTC",
            "Europe/Berlin",
            "daily at 09:00",
            "every 3 hours",
            "",
            " ",
            "m-2",
            "user-m",
            "org-m",
        ]
    ),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(unicode_text, inner, max_size=3),
    max_leaves=6,
)


def patches(keys: list[str]) -> st.SearchStrategy:
    """A patch: mostly accepted keys with values of any JSON type, sometimes a hostile
    key, sometimes not an object at all."""
    key = weighted((8, st.sampled_from(keys)), (1, hostile_text))
    return weighted(
        (9, st.dictionaries(key, json_values, max_size=4)),
        (1, json_values),
    )


def as_json(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def test_management_stores_exactly_what_was_sent_or_refuses_cleanly(conn, roles):
    """put_org, put_user and put_agent with hostile ids and patches (wrong JSON types,
    huge numbers, unicode, SQL fragments, NUL bytes, unknown keys, non-objects): each call
    either stores exactly what it was sent and returns the row as stored, or raises a
    documented code and changes nothing; rows committed before stay as they were."""
    api, worker = roles
    known = commit_known_set(conn, api, worker)
    before = snapshot(conn, known)
    api.execute("select runlane.put_org('org-m', '{}')")
    api.execute("select runlane.put_user('user-m', 'org-m', '{}')")
    api.execute(
        'select runlane.put_agent(\'agent-m\', \'{"org_id": "org-m", '
        '"owner_id": "user-m", "model": "m-1"}\')'
    )
    row_sql = {
        "agent": "select to_jsonb(a) from runlane.agents as a where a.agent_id = %s",
        "org": "select to_jsonb(s) from runlane.platform_settings as s where s.org_id = %s",
        "user": "select to_jsonb(u) from runlane.users as u where u.user_id = %s",
    }
    seen = {"ok": 0, "refused": 0, "errors": set()}

    def row(kind: str, key: str):
        found = conn.execute(row_sql[kind], (key,)).fetchone()
        return found[0] if found else None

    def check(kind: str, key: str, sql: str, params: tuple, patch) -> None:
        was = row(kind, key) if "\x00" not in key else None
        counts = conn.execute(
            "select (select count(*) from runlane.agents), "
            "(select count(*) from runlane.users), "
            "(select count(*) from runlane.platform_settings)"
        ).fetchone()
        outcome = attempt(api, sql, params)
        if not outcome.ok:
            if outcome.client_refused:
                seen["refused"] += 1
            else:
                seen["errors"].add(outcome.sqlstate)
            assert (
                conn.execute(
                    "select (select count(*) from runlane.agents), "
                    "(select count(*) from runlane.users), "
                    "(select count(*) from runlane.platform_settings)"
                ).fetchone()
                == counts
            ), f"a refused {sql} created a row"
            if was is not None:
                assert row(kind, key) == was, f"a refused {sql} changed the row"
            return
        seen["ok"] += 1
        stored = row(kind, key)
        assert stored is not None and outcome.rows[0][0] == stored, "returns the row as stored"
        assert isinstance(patch, dict)
        for k, v in patch.items():
            if k in (
                "schedule",
                "agent_weekly_budget",
                "agent_max_concurrency",
                "agent_iteration_cap",
            ):
                continue  # canonical text / numeric: checked by their own tests
            assert stored[k] == v, f"{kind} {key!r}: {k} stored {stored[k]!r}, sent {v!r}"
        if kind == "agent":
            gates_open = (
                stored["enabled"]
                and not stored["admin_locked"]
                and stored["model"]
                and stored["schedule"]
            )
            assert (stored["next_run_at"] is not None) == bool(gates_open), stored

    agent_ids = weighted((6, st.just("agent-m")), (3, hostile_text))
    org_ids = weighted((6, st.just("org-m")), (3, hostile_text))

    @fuzz_settings(400)
    @given(agent_ids, patches(AGENT_KEYS))
    def agents(agent_id, patch):
        check(
            "agent",
            agent_id,
            "select to_jsonb(runlane.put_agent(%s::text, %s::jsonb))",
            (agent_id, as_json(patch)),
            patch,
        )
        # get_agent reads back every key put_agent accepts, as stored, and next_run_at
        read = attempt(api, "select runlane.get_agent(%s::text)", (agent_id,))
        stored = row("agent", agent_id) if "\x00" not in agent_id else None
        if stored is None:
            assert read.client_refused or read.sqlstate in ("RL008", "22004"), read
        else:
            assert read.ok and read.rows[0][0] == {
                k: stored[k] for k in (*AGENT_KEYS, "next_run_at")
            }, read

    @fuzz_settings(200)
    @given(org_ids, patches(ORG_KEYS))
    def orgs(org_id, patch):
        check(
            "org",
            org_id,
            "select to_jsonb(runlane.put_org(%s::text, %s::jsonb))",
            (org_id, as_json(patch)),
            patch,
        )

    @fuzz_settings(200)
    @given(weighted((3, st.just("user-m")), (3, hostile_text)), org_ids, patches(["timezone"]))
    def users(user_id, org_id, patch):
        check(
            "user",
            user_id,
            "select to_jsonb(runlane.put_user(%s::text, %s::text, %s::jsonb))",
            (user_id, org_id, as_json(patch)),
            patch,
        )

    agents()
    orgs()
    users()
    assert seen["ok"] > 50 and seen["refused"] > 0, seen
    # refusals of values, and of a user id another organization holds (taken, 23505)
    assert {"22023", "23505"} <= seen["errors"], seen

    # A NUL inside a JSON string (\u0000): jsonb cannot hold it; refused at the call
    # boundary (22P05), before put_agent runs.
    was = row("agent", "agent-m")
    outcome = attempt(
        api, "select runlane.put_agent('agent-m', %s::jsonb)", ('{"prompt": "a\\u0000b"}',)
    )
    assert outcome.sqlstate == "22P05" and row("agent", "agent-m") == was
    # A multi-byte prompt just under 1 MB is stored whole, byte for byte; a 10 MB one is
    # refused (22023, the bound of a message body: a prompt goes to the model on every
    # step of every run) and the agent keeps the prompt it had.
    unit = "ünïcødé ✓ 🚀 "
    prompt = unit * (1024 * 1024 // len(unit.encode()))
    outcome = attempt(
        api,
        "select (runlane.put_agent('agent-m', %s::jsonb)).agent_id",
        (as_json({"prompt": prompt}),),
    )
    assert outcome.ok, outcome.sqlstate
    assert (
        conn.execute(
            "select md5(prompt) from runlane.agents where agent_id = 'agent-m'"
        ).fetchone()[0]
        == hashlib.md5(prompt.encode()).hexdigest()
    )
    was = row("agent", "agent-m")
    outcome = attempt(
        api,
        "select (runlane.put_agent('agent-m', %s::jsonb)).agent_id",
        (as_json({"prompt": unit * (10 * 1024 * 1024 // len(unit.encode()))}),),
    )
    assert outcome.sqlstate == "22023" and row("agent", "agent-m") == was
    # Huge numbers: a budget over 1e12, a concurrency over the int range: 22023, unchanged.
    was = row("org", "org-m")
    for patch in (
        '{"agent_weekly_budget": 1e13}',
        '{"agent_max_concurrency": 1e400}',
        '{"agent_iteration_cap": 2147483648}',
        '{"agent_weekly_budget": -1e-400}',
        '{"agent_max_concurrency": 1.5}',
        '{"agent_weekly_budget": "12"}',
    ):
        outcome = attempt(api, "select runlane.put_org('org-m', %s::jsonb)", (patch,))
        assert outcome.sqlstate == "22023", (patch, outcome.sqlstate)
        assert row("org", "org-m") == was
    assert_consistent(conn)
    assert snapshot(conn, known) == before, "nothing committed before the fuzzing changed"


def test_run_ids_keys_and_operator_views_refuse_cleanly(conn, roles):
    """cancel_run, run_status, stream_token, run_timing and outputs_since with any bigint;
    the keyed submit_message and run_now with hostile keys (10 MB, NUL, blanks, SQL);
    agent_journal, timing_summary and lane_status with hostile arguments: each call
    succeeds as specified or raises a documented code, and nothing committed changes."""
    api, worker = roles
    known = commit_known_set(conn, api, worker)
    before = snapshot(conn, known)
    conn.execute("select runlane_test.agent('agent-k', 'org-k')")
    runs = known["runs"]
    by_run = {
        "cancel_run": "select runlane.cancel_run(%s::bigint)",
        "run_status": "select * from runlane.run_status(%s::bigint)",
        "stream_token": "select runlane.stream_token(%s::bigint)",
        "run_timing": "select runlane.run_timing(%s::bigint)",
        "outputs_since": "select * from runlane.outputs_since(%s::bigint)",
    }
    run_ids = st.one_of(
        st.integers(-(2**63), 2**63 - 1), st.sampled_from([0, -1, 2**63 - 1, -(2**63), *runs])
    )
    seen: dict[str, set] = {name: set() for name in by_run}

    @fuzz_settings(300)
    @given(st.sampled_from(sorted(by_run)), run_ids)
    def ids(name, run_id):
        outcome = attempt(api, by_run[name], (run_id,))
        seen[name].add(outcome.sqlstate or "ok")
        if run_id in runs:
            assert outcome.ok, (name, run_id, outcome.sqlstate)
            if name == "cancel_run":
                assert outcome.rows == [("succeeded",)], "a finished run stays as it is"
        else:
            assert outcome.sqlstate == "RL008", (name, run_id, outcome.sqlstate)

    ids()
    assert all(s == {"ok", "RL008"} for s in seen.values()), seen

    messages = known["messages"]
    message_states: set[str] = set()

    @fuzz_settings(200)
    @given(
        st.one_of(
            st.integers(-(2**63), 2**63 - 1),
            st.sampled_from([0, -1, 2**63 - 1, -(2**63), *messages]),
        )
    )
    def message_ids(message_id):
        outcome = attempt(api, "select * from runlane.message_status(%s::bigint)", (message_id,))
        message_states.add(outcome.sqlstate or "ok")
        if message_id in messages:
            assert outcome.ok and outcome.rows[0][0] == message_id, outcome
            assert outcome.rows[0][1] == "succeeded", "the known messages' runs finished"
        else:
            assert outcome.sqlstate == "RL008", (message_id, outcome.sqlstate)

    message_ids()
    assert message_states == {"ok", "RL008"}, message_states
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        api.execute("select runlane.cancel_run(%s::numeric::bigint)", (2**64,))

    def rows_of_agent_k():
        return conn.execute(
            "select (select count(*) from runlane.messages where agent_id = 'agent-k'), "
            "(select count(*) from runlane.runs where agent_id = 'agent-k'), "
            "(select count(*) from runlane.idempotency_keys where agent_id = 'agent-k')"
        ).fetchone()

    keys = weighted(
        (6, hostile_text),
        (1, st.text(alphabet=st.sampled_from(BLANKS), max_size=8)),
        (1, st.sampled_from(["k-1", "k-2"])),
    )
    answers: dict[tuple[str, str], object] = {}
    counts = {"ok": 0, "errors": set()}

    @fuzz_settings(300)
    @given(st.sampled_from(["submit", "run_now"]), keys, st.sampled_from(["hi", "hello"]))
    def keyed(kind, key, body):
        rows_before = rows_of_agent_k()
        if kind == "submit":
            sql = (
                "select message_id, run_id from runlane.submit_message("
                "'agent-k', 'thread-k', %s::text, %s::text)"
            )
            params = (body, key)
        else:
            sql = "select run_id from runlane.run_now('agent-k', %s::text)"
            params = (key,)
        outcome = attempt(api, sql, params)
        if not outcome.ok:
            counts["errors"].add(outcome.sqlstate or "client")
            assert rows_of_agent_k() == rows_before, f"a refused keyed {kind} wrote something"
            return
        counts["ok"] += 1
        first = answers.setdefault((kind, key, body if kind == "submit" else ""), outcome.rows)
        assert outcome.rows == first, "the same key answers the first call's result"
        # Finish what was made, so the next Run now is not skipped as already running.
        conn.execute(
            "update runlane.runs set state = 'succeeded', finished_at = now() "
            "where agent_id = 'agent-k' and state in ('queued', 'running')"
        )

    keyed()
    assert counts["ok"] > 10 and {"22023", "RL010"} <= counts["errors"], counts
    for huge in ("k" * 10 * 1024 * 1024, incompressible_text(3000)):
        rows_before = rows_of_agent_k()
        outcome = attempt(api, "select * from runlane.run_now('agent-k', %s::text)", (huge,))
        assert outcome.sqlstate == "22023" and rows_of_agent_k() == rows_before

    views = {
        "agent_journal": "select * from runlane.agent_journal(%(text)s::text, %(limit)s::int)",
        "timing_summary": (
            "select * from runlane.timing_summary(%(interval)s::interval, "
            "%(text)s::text, %(now)s::timestamptz)"
        ),
        "lane_status": "select * from runlane.lane_status(%(now)s::timestamptz)",
        "agent_schedules": "select * from runlane.agent_schedules()",
        "org_status": "select * from runlane.org_status()",
    }
    instants = weighted(
        (
            8,
            st.datetimes(
                min_value=datetime(1, 1, 2),
                max_value=datetime(9999, 12, 30),
                timezones=st.just(UTC),
            ),
        ),
        (1, st.sampled_from(["infinity", "-infinity", "294276-12-31 23:59:59+00"])),
    )
    texts = weighted(
        (3, st.sampled_from(["agent-k", "agent-known", "manual", "interactive"])),
        (3, hostile_text),
        (1, st.none()),
    )
    view_states: dict[str, set] = {name: set() for name in views}

    @fuzz_settings(300)
    @given(
        st.sampled_from(sorted(views)),
        texts,
        st.integers(-(2**31), 2**31 - 1),
        st.timedeltas(min_value=timedelta(days=-(10**6)), max_value=timedelta(days=10**6)),
        instants,
    )
    # Every view answers a sane call too, whatever the generated examples happen to be:
    # the assertion below is about refusals being clean, not about the generator's luck.
    @example("agent_journal", "agent-k", 10, timedelta(hours=1), datetime(2026, 1, 1, tzinfo=UTC))
    @example("timing_summary", "manual", 10, timedelta(hours=1), datetime(2026, 1, 1, tzinfo=UTC))
    @example("lane_status", None, 10, timedelta(hours=1), datetime(2026, 1, 1, tzinfo=UTC))
    def read(name, text, limit, interval, now):
        for connection in (api, worker):
            outcome = attempt(
                connection,
                views[name],
                {"text": text, "limit": limit, "interval": interval, "now": now},
            )
            view_states[name].add(outcome.sqlstate or "ok")

    read()
    assert all("ok" in states for states in view_states.values()), view_states
    assert_consistent(conn)
    assert snapshot(conn, known) == before, "nothing committed before the fuzzing changed"


def test_erasure_refuses_hostile_ids_cleanly_and_erases_only_its_object(conn, roles):
    """erase_thread, erase_agent, erase_user and erase_org with hostile ids (huge, NUL,
    blanks, SQL) answer RL008, 22023 or 22004 and change nothing committed; erasing the
    known agent then deletes its runs, messages, outputs and journal and nothing else."""
    api, worker = roles
    known = commit_known_set(conn, api, worker)
    before = snapshot(conn, known)
    calls = {
        "erase_thread": "select runlane.erase_thread(%(a)s::text, %(b)s::text)",
        "erase_thread/known": "select runlane.erase_thread('agent-known', %(b)s::text)",
        "erase_agent": "select runlane.erase_agent(%(a)s::text)",
        "erase_user": "select runlane.erase_user(%(a)s::text)",
        "erase_org": "select runlane.erase_org(%(a)s::text)",
    }
    states: set[str] = set()

    @fuzz_settings(300)
    @given(st.sampled_from(sorted(calls)), hostile_text, hostile_text)
    def erase(name, first, second):
        outcome = attempt(api, calls[name], {"a": first, "b": second})
        if outcome.client_refused:
            return
        states.add(outcome.sqlstate or "ok")
        if name == "erase_thread/known" and outcome.ok:
            assert outcome.rows == [(0,)], "a thread nobody wrote to erases nothing"
        else:
            assert outcome.sqlstate in {"RL008", "22023", "22004", "22021"}, (
                name,
                outcome.sqlstate,
            )

    erase()
    assert {"RL008", "22023", "ok"} <= states, states
    assert snapshot(conn, known) == before, "nothing committed before the fuzzing changed"
    erased = api.execute("select runlane.erase_agent('agent-known')").fetchone()[0]
    assert erased == len(known["runs"])
    after = snapshot(conn, known)
    assert {k: v for k, v in after.items() if v} == {
        "settings": before["settings"],
        "users": before["users"],
    }
    assert_consistent(conn)
