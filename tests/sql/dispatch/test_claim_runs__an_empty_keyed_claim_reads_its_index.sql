-- A keyed claim first asks whether its lanes hold any eligible run, and one that finds
-- none returns at once: no lock, no receipt (tests/runner/test_claim_writes_nothing_when_empty.py
-- shows it takes no transaction id). That question is asked on every claim, so it must
-- stay cheap however the queue grew: with the claim's generic plans made while every run
-- was queued (a worker's first claim of a drain) and then every run finished, the empty
-- claim reads runs_handler_fair_claim_idx, never the table; and a claim with runs to take asks
-- the index once.
begin;
select plan(9);

do $$
begin
    perform runlane_test.org('org-a', 1000);
    perform runlane_test.agent('a-1', 'org-a');
    perform runlane_test.chat_backlog('a-1', 3000);
end
$$;

-- The worker's keyed claim of up to 10 chat runs of its handler: how many rows it returned.
create function pg_temp.claimed_with(p_key uuid) returns bigint
language sql
as $$
    select count(*) from runlane.claim_runs(
        'w0', array['interactive'], 10, interval '60 seconds', p_key, false, array['default']
    )
$$;

-- (as in test_claim_runs__stays_on_its_index_after_a_drain.sql: runs and
-- computer_leases only, ANALYZE's counts outlive the rollback)
analyze runlane.runs, runlane.computer_leases;

select is(
    pg_temp.claimed_with('00000000-0000-0000-0000-000000000001'),
    10::bigint,
    'the first keyed claim plans its statements while every run is queued'
);

-- The drain: every run finishes.
update runlane.runs
set state = 'succeeded', finished_at = now()
where state in ('queued', 'running');

create temp table before_empty on commit drop as
select
    pg_stat_get_xact_numscans('runlane.runs'::regclass) as table_scans,
    pg_stat_get_xact_numscans('runlane.runs_handler_fair_claim_idx'::regclass) as fair_scans;

select is(
    pg_temp.claimed_with('00000000-0000-0000-0000-000000000002'),
    0::bigint,
    'nothing queued: an empty claim'
);

select is(
    pg_stat_get_xact_numscans('runlane.runs'::regclass)
    - (select b.table_scans from before_empty as b),
    0::bigint,
    'the empty claim did not scan the table'
);

select cmp_ok(
    pg_stat_get_xact_numscans('runlane.runs_handler_fair_claim_idx'::regclass)
    - (select b.fair_scans from before_empty as b),
    '>',
    0::bigint,
    'it asked runs_handler_fair_claim_idx'
);

select is(
    (
        select c.claim_key from runlane.claim_receipts as c
        where c.worker_id = 'w0' and c.lanes = '{interactive}'
    ),
    '00000000-0000-0000-0000-000000000001'::uuid,
    'the receipt still holds the first claim (the empty one recorded nothing)'
);

select is(
    pg_temp.claimed_with('00000000-0000-0000-0000-000000000001'),
    0::bigint,
    'a resend of the first claim returns none of its runs: they finished'
);

select is(
    current_setting('runlane.claim_backlog', true),
    'off',
    'an empty queue is no backlog: the session''s next claim may take the idle statement'
);

-- Three new messages: the empty claim turned the session's backlog flag off, so this
-- claim takes the idle statement (runs_handler_claim_order_idx), and runs_handler_fair_claim_idx is read
-- by the probe alone, once (pulled up into the receipt's filter, it ran twice).
do $$ begin perform runlane_test.chat_backlog('a-1', 3, 'u-'); end $$;
create temp table before_three on commit drop as
select pg_stat_get_xact_numscans('runlane.runs_handler_fair_claim_idx'::regclass) as fair_scans;
select is(
    pg_temp.claimed_with('00000000-0000-0000-0000-000000000003'),
    3::bigint,
    'a claim with runs to take takes them'
);
select is(
    pg_stat_get_xact_numscans('runlane.runs_handler_fair_claim_idx'::regclass)
    - (select b.fair_scans from before_three as b),
    1::bigint,
    'its probe descended runs_handler_fair_claim_idx once'
);

select * from finish();
rollback;
