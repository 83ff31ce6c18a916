-- A chat backlog is claimed in fair order at the same cost whatever waits in the
-- background lane: with 5,000 background runs queued (a schedule storm held back by its
-- organization's cap) and 50 chat messages waiting, each claim of 10 reads the chat
-- lane's queue (its window: 4 x 28 candidates at most) and not the storm. Before, the
-- window read both lanes in claim order (claim_class, run_id) and stepped over every
-- queued background run to fill its 112 chat candidates: about 5,100 entries per claim,
-- 3-5 ms.
begin;
select plan(3);

select
    set_config('runlane.max_per_org', '200', true) as bound,  -- (the worker's default)
    set_config('runlane.claim_backlog', 'on', false) as backlog,  -- (a draining session)
    set_config('runlane.claim_skip_window', 'off', false) as skip_window;

do $$
begin
    perform runlane_test.agent('chat-1', 'org-chat');
    perform runlane_test.background_storm(5000);
    perform runlane_test.chat_backlog('chat-1', 50);
end
$$;

analyze runlane.runs;  -- (as autovacuum would, with both backlogs queued)

create temp table chat_claim on commit drop as
select
    c.run_id,
    c.fence,
    c.entries_read
from runlane_test.claim_counting_reads('w-chat', array['interactive'], 10) as c;

select is(
    (select array_agg(c.run_id order by c.run_id) from chat_claim as c),
    (
        select array_agg(r.run_id order by r.run_id)
        from (
            select q.run_id from runlane.runs as q
            where q.lane = 'interactive' and q.agent_id = 'chat-1'
            order by q.run_id
            limit 10
        ) as r
    ),
    'the claim takes the ten oldest chat runs'
);
select cmp_ok(
    (select max(c.entries_read) from chat_claim as c),
    '<',
    1500::bigint,
    'and reads the chat queue (and the dead entries earlier transactions left in its '
    || 'indexes), not the 5,000 queued background runs'
);
select is(
    (select count(*) from runlane.runs as r where r.agent_id like 'storm-%' and r.state = 'queued'),
    5000::bigint,
    'the background backlog is left queued'
);

select * from finish();
rollback;
