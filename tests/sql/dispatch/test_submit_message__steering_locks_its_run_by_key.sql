-- A message that joins its thread's queued run reads and locks that run by its key,
-- whatever plan its session cached: it never walks its organization's queue in the
-- fair-claim index, which a lock naming the organization and the queued state would
-- otherwise match (and a plan cached on a small table would then use).
begin;
select plan(3);
-- The plans a session keeps after its fifth call are generic; on a test's few rows such
-- a plan picks any index its quals match, as one cached on a small table does.
set local plan_cache_mode = force_generic_plan;

do $$ begin perform runlane_test.agent('agent-a'); end $$;

do $$
begin
    perform runlane.submit_message('agent-a', 'thread-0', 'hello');
    perform runlane.submit_message('agent-a', 'thread-0', 'more');
    perform runlane.submit_message('agent-a', 'thread-' || g, 'hello') from generate_series(1, 200) as g;
end
$$;

create temp table before_steering on commit drop as
select
    pg_stat_get_xact_numscans('runlane.runs_handler_fair_claim_idx'::regclass) as fair_scans,
    pg_stat_get_xact_numscans('runlane.runs_pkey'::regclass) as key_scans;

create temp table steered on commit drop as
select * from runlane.submit_message('agent-a', 'thread-0', 'and more');

select is((select s.disposition from steered as s), 'steering', 'the message joins the queued run');
select is(
    pg_stat_get_xact_numscans('runlane.runs_handler_fair_claim_idx'::regclass)
    - (select b.fair_scans from before_steering as b),
    0::bigint,
    'it reads nothing of the fair-claim index, where the organization''s queue is'
);
select cmp_ok(
    pg_stat_get_xact_numscans('runlane.runs_pkey'::regclass) - (select b.key_scans from before_steering as b),
    '>=',
    2::bigint,
    'it reads and locks the run by its key'
);

select * from finish();
rollback;
