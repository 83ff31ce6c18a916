-- An idle chat claim costs the same whatever waits in the background lane: with 2,000
-- background runs queued (a schedule storm held back by its organization's cap: 1,500
-- scheduled runs, claim class 1, and 500 "Run now" runs, class 0) and the statistics
-- taken with them queued, the worker's claim of one chat message reads a few entries of
-- runs and its indexes, not the backlog. Before, its idle statement walked
-- runs_claim_order_idx (claim_class, run_id) past every queued background run to fill
-- p_limit + 1 chat candidates, and locked its candidates through a scan of every queued
-- run, or of the table: 4,017 entries read here, about 3 ms more per chat wake-up at
-- 5,000 queued runs. The receipt of the idle claim comes from the fences it locked (no
-- second read of runs).
begin;
select plan(5);

select set_config('runlane.max_per_org', '200', true);  -- (the worker's default bound)
select set_config('runlane.claim_backlog', 'off', false);  -- (an idle worker's session)

do $$
begin
    perform runlane_test.org('org-chat', 4);
    perform runlane_test.agent('chat-1', 'org-chat');
    perform runlane_test.org('org-storm', 1);
    perform runlane_test.owner('owner-of-org-storm', 'org-storm');
end
$$;

insert into runlane.agents (agent_id, org_id, owner_id, model, prompt)
select
    'storm-' || g as agent_id,
    'org-storm' as org_id,
    'owner-of-org-storm' as owner_id,
    'test-model' as model,
    'Summarize the day' as prompt
from generate_series(1, 2000) as g;

-- Rows read by scans of runs and entries read from its indexes, by this transaction.
create function pg_temp.runs_entries_read() returns bigint
language sql as $$
    select sum(pg_stat_get_xact_tuples_returned(i.oid))
    from (
        select 'runlane.runs'::regclass::oid as oid
        union all
        select x.indexrelid from pg_index as x where x.indrelid = 'runlane.runs'::regclass
    ) as i
$$;

create temp table chat_claim (run_id bigint, fence bigint, read bigint) on commit drop;
create temp table chat_run on commit drop as
select runlane_test.queued_run('chat-1', 'interactive', 'interactive') as run_id;

create function pg_temp.claim_one_chat_run() returns void
language plpgsql as $$
declare
    v_before bigint := pg_temp.runs_entries_read();
begin
    insert into chat_claim (run_id, fence, read)
    select c.run_id, c.fence, null
    from runlane.claim_runs(
        'w-chat', array['interactive'], 10, interval '60 seconds', gen_random_uuid(), true
    ) as c;
    update chat_claim set read = pg_temp.runs_entries_read() - v_before where read is null;
end;
$$;

-- The storm: 2,000 queued background runs.
insert into runlane.runs (org_id, agent_id, lane, trigger, prompt, model)
select
    'org-storm' as org_id,
    'storm-' || g as agent_id,
    'background' as lane,
    case when g % 4 = 0 then 'manual' else 'scheduled' end as trigger,
    'p' as prompt,
    'test-model' as model
from generate_series(1, 2000) as g;

-- ANALYZE sees the backlog (as autovacuum would); the claim's plans are made again.
analyze runlane.runs;
select pg_temp.claim_one_chat_run();

select is(
    (select array_agg(c.run_id) from chat_claim as c),
    (select array[c.run_id] from chat_run as c),
    'the claim takes the chat run'
);
select cmp_ok(
    (select c.read from chat_claim as c),
    '<',
    100::bigint,
    'and reads a few entries of runs and its indexes, not the 2,000 queued background runs'
);

select is(
    (select count(*) from runlane.runs as r where r.agent_id like 'storm-%' and r.state = 'queued'),
    2000::bigint,
    'the background backlog is left queued'
);
select is(
    (
        select array[r.run_ids, r.fences]
        from runlane.claim_receipts as r
        where r.worker_id = 'w-chat' and r.lanes = '{interactive}'
    ),
    array[(select array[c.run_id] from chat_run as c), (select array_agg(c.fence) from chat_claim as c)],
    'its receipt records the run under the fence the claim returned'
);
select is(
    (select c.fence from chat_claim as c),
    (select r.fence from runlane.runs as r where r.run_id = (select c.run_id from chat_run as c) and r.state = 'running'),
    'which is the running run''s fence'
);

select * from finish();
rollback;
