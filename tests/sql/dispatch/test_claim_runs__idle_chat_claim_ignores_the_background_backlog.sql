-- An idle chat claim costs the same whatever waits in the background lane: with 5,000
-- background runs queued (a schedule storm held back by its organization's cap: 3,750
-- scheduled runs, claim class 1, and 1,250 "Run now" runs, class 0) and the statistics
-- taken with them queued, the worker's claim of one chat message reads a few entries of
-- runs and its indexes, not the backlog. Before, its idle statement walked the claim-order
-- index (claim_class, run_id) past every queued background run to fill p_limit + 1 chat
-- candidates, and locked its candidates through a scan of every queued run, or of the
-- table: about 2 entries per queued background run, 3 ms more per chat wake-up.
-- The receipt of the idle claim comes from the fences it locked (no second read of runs).
begin;
select plan(5);

select
    set_config('runlane.max_per_org', '200', true) as bound,  -- (the worker's default)
    set_config('runlane.claim_backlog', 'off', false) as backlog;  -- (an idle session)

do $$
begin
    perform runlane_test.agent('chat-1', 'org-chat');
    perform runlane_test.background_storm(5000);
end
$$;

create temp table chat_run on commit drop as
select runlane_test.queued_run('chat-1', 'interactive', 'interactive') as run_id;

-- ANALYZE sees the backlog (as autovacuum would); the claim's plans are made again.
analyze runlane.runs;

create temp table chat_claim on commit drop as
select
    c.run_id,
    c.fence,
    c.entries_read
from runlane_test.claim_counting_reads('w-chat', array['interactive'], 10) as c;

select is(
    (select array_agg(c.run_id) from chat_claim as c),
    (select array[c.run_id] from chat_run as c),
    'the claim takes the chat run'
);
select cmp_ok(
    (select max(c.entries_read) from chat_claim as c),
    '<',
    500::bigint,
    'and reads a few entries of runs and its indexes (and the dead entries earlier '
    || 'transactions left in them), not the 5,000 queued background runs'
);
select is(
    (select count(*) from runlane.runs as r where r.agent_id like 'storm-%' and r.state = 'queued'),
    5000::bigint,
    'the background backlog is left queued'
);
select is(
    (
        select array[r.run_ids, r.fences]
        from runlane_test.claim_receipts() as r
        where r.worker_id = 'w-chat' and r.lanes = '{interactive}'
    ),
    (select array[array_agg(c.run_id), array_agg(c.fence)] from chat_claim as c),
    'its receipt records the run under the fence the claim returned'
);
select is(
    (select c.fence from chat_claim as c),
    (
        select r.fence from runlane.runs as r
        where r.run_id = (select c.run_id from chat_run as c) and r.state = 'running'
    ),
    'which is the running run''s fence'
);

select * from finish();
rollback;
