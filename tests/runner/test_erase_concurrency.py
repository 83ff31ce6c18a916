"""Erasure under concurrency: an eraser races real connections that submit messages to
the thread (or agent) being erased and a worker connection that claims and finishes (and
charges) its runs.

Each erase either fails whole (55006 while a run is unfinished, 55P03 after waiting for
a lock) or commits with nothing of its object left: checked inside the erasing
transaction, after the erase, so a message or run slipped in between the check and the
deletion would show. Afterwards no message is orphaned and the owner's weekly spend is
exactly the sum of every charge made, erased runs included."""

from __future__ import annotations

import random
import threading
import time
from decimal import Decimal

import psycopg

SUBMITTERS = 6
MESSAGES_EACH = 25
COST = Decimal("0.25")

SUBMIT = (
    "select message_id, run_id, disposition "
    "from runlane.submit_message(p_agent_id => %(a)s::text, p_thread_id => %(t)s::text, "
    "p_body => %(b)s::text)"
)
ORPHANS = """
    select count(*) from runlane.messages as m
    where m.run_id is null and not exists (
        select 1 from runlane.runs as r
        where r.agent_id = m.agent_id and r.thread_id = m.thread_id
          and r.lane = 'interactive' and r.state = 'running')
"""


def _start(targets):
    errors: list[BaseException] = []

    def guard(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guard(t)) for t in targets]
    for t in threads:
        t.start()
    return threads, errors


class Race:
    """Submitters, one claiming-and-charging worker connection and one eraser."""

    def __init__(self, dsn: str, thread_ids: tuple[str, ...]):
        self.dsn = dsn
        self.thread_ids = thread_ids
        self.barrier = threading.Barrier(SUBMITTERS + 2)
        self.submitting_done = threading.Event()
        self.erased = threading.Event()  # erase_agent: the agent is gone
        self.submit_errors: list[str] = []
        self.charged = [Decimal(0)]
        self.outcomes: list[str] = []
        self.enough = threading.Event()  # the eraser has raced the submitters enough
        self.sent = [0]

    def submitter(self, number: int):
        def run():
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                self.barrier.wait()
                rng = random.Random(number)
                i = 0
                # At least MESSAGES_EACH each, and on until the eraser has seen enough.
                while i < MESSAGES_EACH or not self.enough.is_set():
                    thread = self.thread_ids[(number + i) % len(self.thread_ids)]
                    try:
                        conn.execute(
                            SUBMIT, {"a": "agent-a", "t": thread, "b": f"body {number}-{i}"}
                        )
                    except psycopg.Error as exc:
                        self.submit_errors.append(exc.sqlstate or "client")
                    self.sent[0] += 1
                    i += 1
                    time.sleep(rng.uniform(0, 0.04))  # pauses in which the worker catches up
            return None

        return run

    def worker(self):
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            self.barrier.wait()
            idle = 0
            while idle < 20 or not self.submitting_done.is_set():
                claimed = conn.execute(
                    "select run_id, fence from runlane.claim_runs('erase-worker', "
                    "array['interactive'], 4)"
                ).fetchall()
                idle = 0 if claimed else idle + 1
                for run_id, fence in claimed:
                    conn.execute(
                        "select runlane.append_output(%s, %s, 'text', 'a reply')", (run_id, fence)
                    )
                    conn.execute(
                        "select runlane.finish_run(%s, %s, 'succeeded', null, %s)",
                        (run_id, fence, COST),
                    )
                    self.charged[0] += COST
                if not claimed:
                    time.sleep(0.005)

    def erase(self, conn: psycopg.Connection, sql: str, left_sql: str, params: dict) -> None:
        """One erase in its own transaction; on success, what is left is read before commit."""
        try:
            with conn.transaction():
                conn.execute(sql, params).fetchone()
                left = conn.execute(left_sql, params).fetchone()[0]
                assert left == 0, f"{left} rows of the erased object appeared before commit"
            self.outcomes.append("erased")
        except psycopg.Error as exc:
            assert exc.sqlstate in ("55006", "55P03"), exc
            self.outcomes.append(exc.sqlstate)


THREAD_LEFT = """
    select (select count(*) from runlane.runs where agent_id = %(a)s and thread_id = %(t)s)
         + (select count(*) from runlane.messages where agent_id = %(a)s and thread_id = %(t)s)
"""


def test_erase_thread_against_submitters_and_a_worker(db_dsn, conn):
    conn.execute("select runlane_test.agent('agent-a')")
    race = Race(db_dsn, ("thread-x", "thread-y"))
    params = {"a": "agent-a", "t": "thread-x"}
    erase = "select runlane.erase_thread(%(a)s, %(t)s)"

    def eraser():
        """Erases until 3 erasures committed while messages kept coming (60 s at most)."""
        with psycopg.connect(db_dsn, autocommit=True) as econn:
            race.barrier.wait()
            deadline = time.monotonic() + 60
            while race.outcomes.count("erased") < 3 and time.monotonic() < deadline:
                race.erase(econn, erase, THREAD_LEFT, params)
                time.sleep(0.002)
            race.enough.set()

    submitters, errors = _start([race.submitter(n) for n in range(SUBMITTERS)])
    others, other_errors = _start([race.worker, eraser])
    for t in submitters:
        t.join()
    race.submitting_done.set()
    for t in others:
        t.join()
    assert errors == [] and other_errors == []
    assert race.submit_errors == [], "a message to a thread being erased waits, it never fails"
    assert race.outcomes.count("erased") >= 3 and "55006" in race.outcomes, race.outcomes

    # Drained: the last erase finds every run finished and leaves nothing of the thread.
    race.erase(conn, erase, THREAD_LEFT, params)
    assert race.outcomes[-1] == "erased"
    assert (
        conn.execute(
            "select count(*) from runlane.threads "
            "where agent_id = 'agent-a' and thread_id = 'thread-x'"
        ).fetchone()[0]
        == 0
    )
    assert conn.execute(ORPHANS).fetchone()[0] == 0
    sent_y = conn.execute(
        "select count(*) from runlane.messages "
        "where agent_id = 'agent-a' and thread_id = 'thread-y'"
    ).fetchone()[0]
    assert (
        sent_y > 0
        and conn.execute(
            "select count(*) from runlane.messages where agent_id = 'agent-a'"
        ).fetchone()[0]
        == sent_y
    ), "the other thread keeps its messages; none of thread-x is left"
    spend = conn.execute("select runlane.weekly_spend('owner-of-org-a')").fetchone()[0]
    assert spend == race.charged[0] > 0, "every charge still counts, erased runs' too"


AGENT_LEFT = """
    select (select count(*) from runlane.runs where agent_id = %(a)s)
         + (select count(*) from runlane.messages where agent_id = %(a)s)
         + (select count(*) from runlane.threads where agent_id = %(a)s)
         + (select count(*) from runlane.agents where agent_id = %(a)s)
"""


def test_erase_agent_against_submitters_and_a_worker(db_dsn, conn):
    conn.execute("select runlane_test.agent('agent-a')")
    race = Race(db_dsn, ("thread-x", "thread-y", "thread-z"))
    params = {"a": "agent-a"}
    erase = "select runlane.erase_agent(%(a)s)"

    def eraser():
        with psycopg.connect(db_dsn, autocommit=True) as econn:
            race.barrier.wait()
            time.sleep(0.05)  # let some runs start first
            deadline = time.monotonic() + 60
            while "erased" not in race.outcomes and time.monotonic() < deadline:
                race.erase(econn, erase, AGENT_LEFT, params)
                time.sleep(0.002)
            race.enough.set()

    submitters, errors = _start([race.submitter(n) for n in range(SUBMITTERS)])
    others, other_errors = _start([race.worker, eraser])
    for t in submitters:
        t.join()
    race.submitting_done.set()
    for t in others:
        t.join()
    assert errors == [] and other_errors == []
    if "erased" not in race.outcomes:  # drained now: the agent has no unfinished run
        race.erase(conn, erase, AGENT_LEFT, params)
    assert race.outcomes.count("erased") == 1, race.outcomes
    # A message sent after the erasure finds no agent (RL008); one that was already on its
    # way when the agent's row went fails its key check (23503): neither writes anything.
    assert set(race.submit_errors) <= {"RL008", "23503"}, race.submit_errors
    assert conn.execute(AGENT_LEFT, params).fetchone()[0] == 0
    assert (
        conn.execute(
            "select count(*) from runlane.idempotency_keys where agent_id = 'agent-a'"
        ).fetchone()[0]
        == 0
    )
    assert conn.execute(ORPHANS).fetchone()[0] == 0
    assert (
        conn.execute("select count(*) from runlane.charges where run_id is not null").fetchone()[0]
        == 0
    )
    spend = conn.execute("select runlane.weekly_spend('owner-of-org-a')").fetchone()[0]
    assert spend == race.charged[0], "every charge still counts, erased runs' too"
