-- The per-worker organization bound (runlane.max_per_org) costs one count of the
-- worker's running runs per claim, whatever the statistics: with statistics gathered
-- while every run was queued (a drain's start) and the claim's generic plans made then,
-- a claim of 80 candidates reads the indexes holding running runs once, not once per candidate
-- (each such read walks every worker's running runs of the organization: 40 ms per
-- claim in a 4-worker drain). The bound still holds.
begin;
select plan(4);

do $$
begin
    perform runlane_test.org('org-a', 1000);
    perform runlane_test.agent('a-1', 'org-a');
end
$$;

insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model)
select
    'org-a' as org_id,
    'a-1' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    't-' || g as thread_id,
    'x' as prompt,
    'noop' as model
from generate_series(1, 400) as g;

analyze runlane.runs;

do $$
begin
    perform set_config('runlane.max_per_org', '100', true);  -- this transaction's claims
end
$$;

select is(
    (select count(*) from runlane.claim_runs('w1', array['interactive'], 50)),
    50::bigint,
    'the first claim of the drain plans its statements while every run is queued'
);

-- Another worker holds runs of the same organization too.
select is(
    (select count(*) from runlane.claim_runs('w2', array['interactive'], 100)),
    100::bigint,
    'another worker takes its own 100'
);

create temp table before_claim on commit drop as
select
    (
        select sum(pg_stat_get_xact_numscans(i.indexrelid))::bigint
        from pg_index as i
        where i.indexrelid = any(array[
            'runlane.runs_worker_running_idx', 'runlane.runs_background_running_idx',
            'runlane.runs_unfinished_lane_idx',
            'runlane.runs_unfinished_agent_idx'
        ]::regclass[])
    ) as scans;

select is(
    (select count(*) from runlane.claim_runs('w1', array['interactive'], 80)),
    50::bigint,
    'the bound of 100 cuts the page of 80 to the 50 runs w1 has room for'
);

select cmp_ok(
    (
        select sum(pg_stat_get_xact_numscans(i.indexrelid))::bigint
        from pg_index as i
        where i.indexrelid = any(array[
            'runlane.runs_worker_running_idx', 'runlane.runs_background_running_idx',
            'runlane.runs_unfinished_lane_idx',
            'runlane.runs_unfinished_agent_idx'
        ]::regclass[])
    )
    - (select b.scans from before_claim as b),
    '<=',
    2::bigint,
    'the running runs are counted once for the claim, not once per candidate'
);

select * from finish();
rollback;
