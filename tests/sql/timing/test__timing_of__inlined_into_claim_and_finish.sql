-- The claim and the finish build their timing rows with _timing_of inlined into their
-- statements, never as a call per run (a call costs about 7 us per run more):
-- with every function call counted, a claim and a finish of two chat runs count no call
-- of _timing_of, and still return the timing rows run_timing returns.
begin;
select plan(4);

set local track_functions = 'all';
do $$
begin
    perform runlane_test.agent('agent-inline', 'org-inline');
    perform runlane.submit_message('agent-inline', 'thread-' || g, 'hello')
    from generate_series(1, 2) as g;
end
$$;
create temp table claimed on commit drop as
select
    c.run_id,
    c.fence,
    c.timing
from runlane.claim_runs(
    'w-inline', array['interactive'], 10, interval '60 seconds',
    gen_random_uuid(), true
) as c;
create temp table finished on commit drop as
select
    f.run_id,
    f.timing
from runlane.finish_runs(
    array(select c.run_id from claimed as c order by c.run_id),
    array(select c.fence from claimed as c order by c.run_id),
    array['succeeded', 'succeeded'], array[null, null]::text[], array[0, 0]::numeric[],
    array[0, 0], array[]::text[], array[]::text[]
) as f;

select is((select count(*) from claimed), 2::bigint, 'the claim took both runs');
select is(
    coalesce(pg_stat_get_xact_function_calls('runlane._timing_of(runlane.runs, timestamptz)'::regprocedure), 0),
    0::bigint,
    'neither the claim nor the finish called _timing_of: it is inlined'
);
select is(
    (select array_agg(c.timing - 'event' order by c.run_id) from claimed as c),
    (
        select array_agg(t.timing order by t.run_id)
        from finished as f
        cross join lateral (
            select
                f.run_id,
                runlane.run_timing(f.run_id) - 'run.outcome' - 'run.total_ms'
                - 'run.execution_wall_ms' as timing
        ) as t
    ),
    'the claim''s timing rows are run_timing''s, as it stood at the start'
);
select is(
    (select array_agg(f.timing - 'event' order by f.run_id) from finished as f),
    (select array_agg(runlane.run_timing(f.run_id) order by f.run_id) from finished as f),
    'the finish''s timing rows are run_timing''s'
);

select * from finish();
rollback;
