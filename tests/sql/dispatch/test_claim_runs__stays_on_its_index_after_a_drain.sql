-- A drain must not make claims slower with every run it finishes: with statistics
-- gathered while every run was queued (one organization, so the claim takes its
-- rounds path) and the claim's generic plans made then (a worker's first claim of the
-- drain; plans are cached for the session), a later claim reads the queued runs
-- through runs_handler_fair_claim_idx, never a walk of runs_pkey that filters out every
-- finished run (quadratic over a drain). And its fair
-- window reads the oldest queued runs in runs_handler_claim_order_idx order and stops after 4 x
-- the runs it needs: a window that also named the organizations left out ("org_id <>
-- all(...)", estimated to keep no row under one organization's statistics) would be
-- planned as a bitmap read of the whole queue and a sort (10-15 ms for a worker's first
-- claim at 20,000 queued runs).
begin;
select plan(8);

do $$
begin
    perform runlane_test.org('org-a', 1000);
    perform runlane_test.agent('a-1', 'org-a');
end
$$;

-- 3,000 chat runs, all queued when the statistics are taken (as autovacuum would after
-- a burst of messages); then the oldest 2,000 finish, as a drain leaves them.
insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model)
select
    'org-a' as org_id,
    'a-1' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    't-' || g as thread_id,
    'x' as prompt,
    'noop' as model
from generate_series(1, 3000) as g;

-- (computer_leases too, as autovacuum keeps it: with only runs analyzed, the window can
-- be planned on its index; no other table, as ANALYZE's page and row counts
-- are written in place and outlive this test's rollback)
analyze runlane.runs, runlane.computer_leases;

-- The first claim also steps over the index entries of runs other tests rolled back
-- (they come first in run_id order) and marks them dead.
select is(
    (select count(*) from runlane.claim_runs('w0', array['interactive'], 10)),
    10::bigint,
    'the first claim of the drain plans its statements while every run is queued'
);

-- Its one organization sends this session's later claims past the window
-- (runlane.claim_skip_window): the next claim is told to read it again.
select set_config('runlane.claim_skip_window', 'off', false);
create temp table before_window on commit drop as
select pg_stat_get_xact_tuples_returned('runlane.runs_handler_claim_order_idx'::regclass) as entries;
create temp table window_claimed on commit drop as
select c.run_id
from runlane.claim_runs('w0', array['interactive'], 10) as c;
select is(
    (select array_agg(c.run_id order by c.run_id) from window_claimed as c),
    (
        select array_agg(r.run_id order by r.run_id)
        from (
            select q.run_id from runlane.runs as q
            order by q.run_id
            limit 10 offset 10
        ) as r
    ),
    'the window claim takes the next ten oldest runs'
);
select cmp_ok(
    pg_stat_get_xact_tuples_returned('runlane.runs_handler_claim_order_idx'::regclass)
    - (select b.entries from before_window as b),
    '>',
    0::bigint,
    'the window reads runs_handler_claim_order_idx'
);
select cmp_ok(
    pg_stat_get_xact_tuples_returned('runlane.runs_handler_claim_order_idx'::regclass)
    - (select b.entries from before_window as b),
    '<',
    300::bigint,
    'and stops after a few of its entries, not the 2,990 queued runs'
);

update runlane.runs
set state = 'succeeded', finished_at = now()
where run_id in (
    select r.run_id from runlane.runs as r
    order by r.run_id
    limit 2000
);

create temp table before_claim on commit drop as
select
    pg_stat_get_xact_tuples_returned('runlane.runs_pkey'::regclass) as pkey_entries,
    pg_stat_get_xact_numscans('runlane.runs_handler_fair_claim_idx'::regclass) as fair_scans;

create temp table claimed on commit drop as
select c.run_id
from runlane.claim_runs('w1', array['interactive'], 10) as c;

select is(
    (select count(*) from claimed),
    10::bigint,
    'the claim takes a full page'
);

select is(
    (select min(c.run_id) from claimed as c),
    (select min(r.run_id) from runlane.runs as r where r.state = 'running'),
    'the oldest queued run is in it'
);

select cmp_ok(
    pg_stat_get_xact_tuples_returned('runlane.runs_pkey'::regclass)
    - (select b.pkey_entries from before_claim as b),
    '<',
    200::bigint,
    'the claim reads a few primary-key entries (its own runs), not the 2,000 finished ones'
);

select cmp_ok(
    pg_stat_get_xact_numscans('runlane.runs_handler_fair_claim_idx'::regclass)
    - (select b.fair_scans from before_claim as b),
    '>',
    0::bigint,
    'the queued runs are read through runs_handler_fair_claim_idx'
);

select * from finish();
rollback;
