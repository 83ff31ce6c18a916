"""Every runlane function's grants match the split of DESIGN.md, read from the catalogs.

EXPECTED below is the spec, written out by hand: for each function (its regprocedure
signature) whether runlane_api and runlane_worker may execute it. A function that is in
the database but not in the table fails the test, so every new function must be
classified here on purpose. DESIGN's split: the api role holds the client functions
(submit_message, publish_run, create_run, run_now, outputs_since); the worker role holds
claiming, the fenced worker writes and maintenance. Shared by both: publish_run and
create_run (the worker publishes the runs tick fires and creates runs for scheduled and
maintenance jobs and reactions), run_timing, and the read-only
parse_schedule, next_slot and weekly_spend. Private helpers (`_name`) and trigger
functions (`tg_…`) are executable by nobody but their owner, and PUBLIC holds nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

FUNCTIONS_DIR = Path(__file__).parent.parent.parent / "sql" / "functions"

API, WORKER, BOTH, NOBODY = (True, False), (False, True), (True, True), (False, False)

EXPECTED: dict[str, tuple[bool, bool]] = {
    # messages and dispatch
    "runlane.submit_message(text,text,text)": API,
    "runlane.run_now(text)": API,
    # the idempotency-key forms (a retry returns the first answer)
    "runlane.submit_message(text,text,text,text)": API,
    # submit_message and its run's notification in one commit (keyed when given a key)
    "runlane.send_message(text,text,text,text)": API,
    "runlane.run_now(text,text)": API,
    "runlane.publish_run(bigint,timestamp with time zone)": BOTH,
    "runlane.create_run(text,text,text,timestamp with time zone)": BOTH,
    "runlane.claim_runs(text,text[],integer,interval)": WORKER,
    "runlane.claim_runs(text,text[],integer,interval,uuid)": WORKER,  # keyed: resend-safe
    # keyed, and reporting the runs it skipped because a gate closed (the worker's claim)
    "runlane.claim_runs(text,text[],integer,interval,uuid,boolean)": WORKER,
    # ... of the handlers the worker serves (its rows name the handler)
    "runlane.claim_runs(text,text[],integer,interval,uuid,boolean,text[])": WORKER,
    "runlane.run_messages(bigint,bigint)": WORKER,
    # a thread's earlier turns, for an agent that sends the conversation to a model
    "runlane.thread_history(bigint,bigint,integer)": WORKER,
    # outputs and timing
    # a run's text is the application's to read; a worker reads only the run it owns,
    # fenced (run_messages, thread_history)
    "runlane.outputs_since(bigint,bigint,integer)": API,
    "runlane.outputs_since_many(bigint[],bigint[],integer)": API,  # many streams, one read
    "runlane.run_timing(bigint)": BOTH,
    "runlane.run_status(bigint)": BOTH,
    "runlane.superseded_through(bigint)": BOTH,  # the end-of-stream rule's superseded part
    # the user's Stop
    "runlane.cancel_run(bigint)": API,
    # which run answers a message (a held one: its follow-up run once it exists)
    "runlane.message_status(bigint)": API,
    # management: organizations, users, agents
    "runlane.put_org(text,jsonb)": API,
    "runlane.put_user(text,text,jsonb)": API,
    "runlane.put_agent(text,jsonb)": API,
    "runlane.get_agent(text)": API,
    "runlane._agent_patch_types()": NOBODY,
    "runlane._api_login()": NOBODY,
    "runlane._citus_node_without_logins()": NOBODY,
    "runlane._citus_distributed(text)": NOBODY,
    "runlane._local_shards(text)": NOBODY,
    "runlane._run_orgs(bigint[])": NOBODY,
    (
        "runlane._claim_runs_of_node("
        "text,text[],text[],integer,interval,uuid,boolean,integer,boolean)"
    ): NOBODY,
    "runlane._check_patch(text,jsonb,jsonb)": NOBODY,
    "runlane._require_registry_window(text,interval,integer)": NOBODY,
    "runlane._patch_int(text,jsonb,integer)": NOBODY,
    # erasure ("delete my data"), scope-checked like every api function
    "runlane.erase_thread(text,text)": API,
    "runlane.erase_agent(text)": API,
    "runlane.erase_user(text)": API,
    "runlane.erase_org(text)": API,
    "runlane._require_erasure_schema()": NOBODY,
    "runlane._lock_for_erasure(text[],text)": NOBODY,
    "runlane._erase_agents(text,text[],text)": NOBODY,
    "runlane._erase_runs(bigint[],text)": NOBODY,
    # fenced worker writes
    "runlane.heartbeat(bigint,bigint,interval)": WORKER,
    "runlane.append_output(bigint,bigint,text,text)": WORKER,
    "runlane.save_checkpoint(bigint,bigint,jsonb)": WORKER,
    "runlane.take_steering(bigint,bigint)": WORKER,
    "runlane.finish_run(bigint,bigint,text,text,numeric)": WORKER,
    "runlane.release_run(bigint,bigint,timestamp with time zone,text)": WORKER,
    "runlane.retry_run(bigint,bigint,text,interval)": WORKER,
    "runlane.charge(bigint,bigint,numeric)": WORKER,
    "runlane.charge(bigint,bigint,numeric,bigint)": WORKER,
    # the runner's batched forms of run_messages and append_output + finish_run
    "runlane.run_messages_many(bigint[],bigint[])": WORKER,
    "runlane.finish_runs(bigint[],bigint[],text[],text[],numeric[],integer[],text[],text[])": (
        WORKER
    ),
    "runlane.finish_runs(bigint[],bigint[],text[],text[],numeric[],integer[],text[],text[],"
    "bigint[])": WORKER,
    "runlane.append_outputs(bigint[],bigint[],bigint[],text[],text[])": WORKER,
    # the same writes with a write sequence number: a resend of an applied write is a no-op
    "runlane.append_output(bigint,bigint,text,text,bigint)": WORKER,
    "runlane.save_checkpoint(bigint,bigint,jsonb,bigint)": WORKER,
    "runlane.finish_run(bigint,bigint,text,text,numeric,bigint)": WORKER,
    "runlane.release_run(bigint,bigint,timestamp with time zone,text,bigint)": WORKER,
    "runlane.retry_run(bigint,bigint,text,interval,bigint)": WORKER,
    "runlane.take_steering(bigint,bigint,bigint)": WORKER,
    # maintenance and upgrade
    "runlane.tick(timestamp with time zone,integer)": WORKER,
    "runlane.reap_stale(timestamp with time zone,integer)": WORKER,
    "runlane.cancel_redundant_timer_runs(integer)": WORKER,
    "runlane.queue_delay(interval,timestamp with time zone)": WORKER,
    "runlane.drain_legacy_deliveries(integer)": WORKER,
    "runlane.purge_finished(interval,integer)": WORKER,
    "runlane._retention_cutoff(interval,timestamp with time zone)": NOBODY,
    "runlane._refuse_write_number(runlane.runs,bigint,bigint,text)": NOBODY,
    # retention of the rows runs do not carry: emptied threads' lock rows, the claim
    # receipts of workers long gone
    "runlane.purge_empty_threads(text,text,integer)": WORKER,
    "runlane.purge_stale_claim_receipts(interval,integer)": WORKER,
    "runlane.purge_gone_workers(interval,integer)": WORKER,
    "runlane.upgrade_status()": WORKER,
    "runlane.register_worker(text,text[],boolean)": WORKER,
    "runlane.register_worker(text,text[],boolean,text[],text,integer)": WORKER,  # handlers, host
    "runlane.lead_maintenance(text,interval)": WORKER,
    "runlane.lead_maintenance_with_holder(text,interval)": WORKER,
    "runlane.resign_maintenance(text)": WORKER,
    # read by workers and by stream followers (they poll while it is high)
    "runlane.notify_queue_usage()": BOTH,
    "runlane.notify_queue_cutoff()": WORKER,
    # other logins' backends (pid, login, application): the operator's, not a tenant's
    "runlane.notify_queue_holders(integer)": WORKER,
    # operator views (runlane status, journal, timing summary): an application reads
    # them too, each limited to its organization when its login is scoped
    "runlane.agent_journal(text,integer)": BOTH,
    # one run with its last error (runlane run ID): the error can quote user content,
    # so the role that reads the run's outputs anyway, limited when scoped
    "runlane.run_detail(bigint)": API,
    "runlane.agent_schedules()": BOTH,
    "runlane.lane_status(timestamp with time zone)": BOTH,
    "runlane.unserved_handlers(timestamp with time zone)": BOTH,
    "runlane.org_status()": BOTH,
    "runlane.timing_summary(interval,text,timestamp with time zone)": BOTH,
    # the dashboard's charts and queue-delay warning, scoped the same way
    "runlane.lane_minutes(interval,timestamp with time zone,integer[])": BOTH,
    "runlane.queue_delay_status(interval,timestamp with time zone)": BOTH,
    "runlane.owner_spend(timestamp with time zone)": BOTH,
    "runlane.agent_last_runs()": BOTH,
    # the overview's counts and warning in one read, and a page of agents
    "runlane.lane_overview(interval,timestamp with time zone)": BOTH,
    "runlane.agent_page(text,integer,text,text)": BOTH,
    # the runs and workers pages, failures and reaps per minute, a run's reply: scoped
    # the same way; the reply is user content, read by the role that reads outputs
    "runlane.runs_page(text,text,text,text,text,integer,interval,timestamp with time zone)": API,
    "runlane.workers_page(timestamp with time zone)": API,
    "runlane.failure_minutes(interval,timestamp with time zone)": BOTH,
    "runlane.run_reply(bigint)": API,
    # the journal's event counts across every organization, for the worker's /metrics
    "runlane.journal_counts()": WORKER,
    # schedules and budget: read-only queries
    "runlane.parse_schedule(text)": BOTH,
    "runlane.next_slot(text,text,timestamp with time zone)": BOTH,
    "runlane.org_node(text)": BOTH,
    "runlane.weekly_spend(text,timestamp with time zone)": BOTH,
    # tenants: the stream token readers match runlane_outputs hints with (scoped like
    # every api function); scoping a login is the schema owner's, granted to nobody
    "runlane.stream_token(bigint)": BOTH,
    "runlane.scope_api_login(name,text)": NOBODY,
    # private helpers and triggers
    "runlane._agent_gates(text,boolean)": NOBODY,
    "runlane._api_org()": NOBODY,
    "runlane._in_scope(text)": NOBODY,
    "runlane._refuse_scoped_worker()": NOBODY,
    "runlane._queue_delay(interval,timestamp with time zone,text)": NOBODY,
    "runlane._claim_idempotency_key(text,text,text,bytea)": NOBODY,
    "runlane._stream_token(bigint)": NOBODY,
    "runlane._lock_worker_bound(text)": NOBODY,
    "runlane._max_per_org()": NOBODY,
    "runlane._max_per_org_work_conserving()": NOBODY,
    "runlane._commit_empty_claim_without_flush()": NOBODY,
    "runlane._budget_exhausted(text,text,timestamp with time zone)": NOBODY,
    "runlane._record_charge(runlane.runs,numeric,timestamp with time zone)": NOBODY,
    "runlane._require_amount(numeric,text)": NOBODY,
    "runlane._dispatch_held_messages(text,text)": NOBODY,
    "runlane._finish_runs_together(bigint[],bigint[],text[],text[],numeric[],integer[],text[],"
    "text[],bigint[])": NOBODY,
    "runlane._lock_agent(text)": NOBODY,
    "runlane._lock_agent(text,text)": NOBODY,
    "runlane._skip_gated_runs(bigint[],text[])": NOBODY,
    # claim_runs' steps
    "runlane._claim_check_arguments(text,text[],integer,interval,boolean)": NOBODY,
    "runlane._claim_replay(bigint[],bigint[],boolean)": NOBODY,
    "runlane._claim_check_handlers(text[])": NOBODY,
    "runlane._claim_fair(text,text[],text[],integer,interval,uuid,integer,boolean)": NOBODY,
    "runlane._claim_candidates(text[],text[],integer,bigint[],text[],text[],integer,text[],"
    "integer[],boolean,text[],text[])": NOBODY,
    "runlane._claim_loose_scan(text[],text[],smallint,integer,bigint[],text[],text[],integer,"
    "text[],integer[])": NOBODY,
    "runlane._claim_lock(integer,bigint[],text[],integer,text[],integer[],text[],integer[],"
    "bigint[],text[],bigint[],text[],text[],text[],bigint[])": NOBODY,
    "runlane._claim_gates_and_caps(bigint[],bigint[],boolean,bigint[],text[],integer[])": NOBODY,
    "runlane._claim_org_caps(bigint[],text[])": NOBODY,
    "runlane._claim_computer_leases(bigint[],bigint,interval)": NOBODY,
    "runlane._new_background_run(runlane.agents,text,text,timestamp with time zone,text,"
    "timestamp with time zone,text)": NOBODY,
    "runlane._notify(text,text)": NOBODY,
    "runlane._notify_run(bigint,text)": NOBODY,
    "runlane._notify_output(bigint,bigint)": NOBODY,
    "runlane._notify_stream_end(bigint)": NOBODY,
    "runlane._notify_stream_end(bigint[])": NOBODY,
    "runlane._notify(text,text[])": NOBODY,
    "runlane._stream_token(bigint[])": NOBODY,
    "runlane._thread_lock(text,text)": NOBODY,
    "runlane._lock_thread(text,text)": NOBODY,
    "runlane._lock_thread(text,text,text)": NOBODY,
    "runlane._record_thread_run(text,text,bigint)": NOBODY,
    "runlane._record_thread_run(text,text,bigint,text)": NOBODY,
    "runlane._agent_org(text)": NOBODY,
    "runlane._rows_name_their_org()": NOBODY,
    "runlane._write_run_events(bigint[],text[],text,jsonb[])": NOBODY,
    "runlane._write_run_outputs(bigint[],text[],integer[],text[],text[])": NOBODY,
    "runlane._require_owner(bigint,bigint,bigint)": NOBODY,
    "runlane._require_owner(bigint,bigint,bigint,boolean)": NOBODY,
    "runlane._run_org_for_write(bigint)": NOBODY,
    "runlane._run_has_outputs(bigint,text)": NOBODY,
    "runlane._free_computer(runlane.runs)": NOBODY,
    "runlane._write_applied(runlane.runs,bigint,bigint)": NOBODY,
    "runlane._resent_first_response(runlane.runs,bigint)": NOBODY,
    "runlane._agent_timezone(text,text)": NOBODY,
    "runlane._is_timezone(text)": NOBODY,
    "runlane._last_slot(jsonb,text,timestamp with time zone,timestamp with time zone)": NOBODY,
    "runlane._late_notice(runlane.runs)": NOBODY,
    "runlane._next_slot(jsonb,text,timestamp with time zone,timestamp with time zone)": NOBODY,
    "runlane._parse_schedule(text,text,timestamp with time zone)": NOBODY,
    "runlane._wall_to_instant(timestamp without time zone,text)": NOBODY,
    "runlane._ms_between(timestamp with time zone,timestamp with time zone)": NOBODY,
    "runlane._timing_row(bigint,text)": NOBODY,
    "runlane._timing_of(runlane.runs,timestamp with time zone)": NOBODY,
    "runlane._close_run(runlane.runs,text,text,text)": NOBODY,
    "runlane._close_run_with(runlane.runs,text,text,text,numeric,timestamp with time zone)": NOBODY,
    "runlane._close_run_with(runlane.runs,text,text,text,numeric,timestamp with time zone,"
    "bigint)": NOBODY,
    "runlane._notify_computer_waiter(text)": NOBODY,
    "runlane._require_owner(bigint,bigint)": NOBODY,
    "runlane._refuse_stopped(runlane.runs)": NOBODY,
    "runlane._agent_runs_newest_first(text,integer)": NOBODY,
    "runlane._agent_runs_newest_first_of_org(text,text,integer)": NOBODY,
    # input validation: hostile and malformed input
    "runlane._quote_for_error(text)": NOBODY,
    "runlane._check_id(text,text)": NOBODY,
    "runlane._check_wake_at(timestamp with time zone)": NOBODY,
    "runlane._check_body(text,text)": NOBODY,
    "runlane._fence_floor()": NOBODY,
    "runlane._check_instant(text,timestamp with time zone)": NOBODY,
    "runlane._tick_failed(runlane.agents,timestamp with time zone,text)": NOBODY,
    "runlane.tg_agents__schedule()": NOBODY,
    "runlane.tg_platform_settings__claim_lock()": NOBODY,
    "runlane.tg_platform_settings__timezone()": NOBODY,
    "runlane.tg_users__timezone()": NOBODY,
    "runlane.tg_org_id__from_its_owner()": NOBODY,
}

GRANTS = """
select p.oid::regprocedure::text,
       has_function_privilege('runlane_api', p.oid, 'execute'),
       has_function_privilege('runlane_worker', p.oid, 'execute'),
       p.prosecdef,
       coalesce(array_to_string(p.proacl, ',') ~ '(^|,)=X', true)
from pg_proc as p
where p.pronamespace = 'runlane'::regnamespace
"""


def _catalog(conn) -> dict[str, tuple[bool, bool, bool, bool]]:
    return {row[0]: tuple(row[1:]) for row in conn.execute(GRANTS).fetchall()}


def test_every_function_is_classified_in_the_spec(conn):
    functions = set(_catalog(conn))
    assert sorted(functions - EXPECTED.keys()) == [], "functions missing from EXPECTED"
    assert sorted(EXPECTED.keys() - functions) == [], "EXPECTED names functions that do not exist"


def test_each_role_executes_exactly_what_the_spec_grants(conn):
    catalog = _catalog(conn)
    wrong = {
        signature: {"expected (api, worker)": EXPECTED[signature], "actual": (api, worker)}
        for signature, (api, worker, _definer, _public) in catalog.items()
        if signature in EXPECTED and EXPECTED[signature] != (api, worker)
    }
    assert wrong == {}


def test_public_executes_nothing_and_every_granted_function_is_a_definer_or_pure(conn):
    catalog = _catalog(conn)
    assert sorted(sig for sig, (*_, public) in catalog.items() if public) == []
    # An invoker function granted to a role runs with that role's rights, which reach no
    # table and no private helper: only a function that uses neither may be an invoker.
    # (next_slot and parse_schedule call the private runlane._next_slot and
    # runlane._parse_schedule, so they must be definers: as invokers both roles would get
    # 42501 from them, see tests/sql/security/.)
    invokers = sorted(
        sig for sig, (api, worker, definer, _) in catalog.items() if (api or worker) and not definer
    )
    assert invokers == []


def test_each_function_file_grants_what_the_spec_says(conn):
    """The grant lines of each file in sql/functions agree with the spec (so the
    database state does not come from a stray grant elsewhere)."""
    files = {path: path.read_text() for path in FUNCTIONS_DIR.rglob("*.sql")}
    mismatches = {}
    for signature, (api, worker) in EXPECTED.items():
        name = signature.split("(")[0]
        defining = [
            p
            for p, text in files.items()
            if re.search(rf"create or replace function {re.escape(name)}\s*\(", text)
        ]
        assert len(defining) == 1, f"{name} is defined in {defining}"
        text = files[defining[0]]
        granted = set()
        on_function = rf"on function {re.escape(name)}\s*\([^)]*\)"
        for match in re.finditer(rf"grant execute {on_function}\s+to\s+([^;]+);", text):
            granted |= {role.strip() for role in match.group(1).split(",")}
        want = {role for role, on in (("runlane_api", api), ("runlane_worker", worker)) if on}
        revoked = re.search(rf"revoke all {on_function}\s+from public;", text)
        if granted != want or not revoked:
            mismatches[str(defining[0].relative_to(FUNCTIONS_DIR))] = {
                "grants": sorted(granted),
                "expected": sorted(want),
                "revokes public": bool(revoked),
            }
    assert mismatches == {}
