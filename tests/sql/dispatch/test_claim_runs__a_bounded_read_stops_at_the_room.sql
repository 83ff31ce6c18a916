-- With the per-worker bound (runlane.max_per_org), a claim reads an organization's queued
-- runs no further than the room it has on the worker: a page of 100 for an organization
-- with room for 10 fetches about 10 runs through runs_handler_fair_claim_idx, not the 2 x 100 + 8
-- candidates a page reads without the bound (a worker at its bound in a one-tenant
-- drain would read that many rows to lock the 40-odd it has room for).
begin;
select plan(3);

-- w1 already runs 90 of org-a's runs (inserted running: the queue's index holds only the
-- 150 queued ones, so what the claim reads of it is what it counts).
do $$
begin
    perform runlane_test.org('org-a', 1000);
    perform runlane_test.agent('a-1', 'org-a');
    perform runlane_test.running_chat_runs('a-1', 'w1', 90);
    perform runlane_test.chat_backlog('a-1', 150);
end
$$;

-- (statistics of this queue, as a drain's autoanalyze would have them)
analyze runlane.runs;

do $$
begin
    perform set_config('runlane.max_per_org', '100', true);  -- this transaction's claims
    perform set_config('runlane.claim_skip_window', 'on', true);  -- the loose scan first
end
$$;

create temp table before_claim on commit drop as
select pg_stat_get_xact_tuples_fetched('runlane.runs_handler_fair_claim_idx'::regclass) as entries;

select is(
    (
        select array_agg(c.run_id order by c.run_id)
        from runlane.claim_runs('w1', array['interactive'], 100) as c
    ),
    (
        select array_agg(r.run_id order by r.run_id)
        from (
            select q.run_id from runlane.runs as q
            where q.state = 'queued' order by q.run_id limit 10
        ) as r
    ),
    'w1, running 90 of its 100, takes the 10 oldest queued runs with a page of 100'
);

select cmp_ok(
    pg_stat_get_xact_tuples_fetched('runlane.runs_handler_fair_claim_idx'::regclass)
    - (select b.entries from before_claim as b),
    '<=',
    20::bigint,
    'and fetches about that many queued runs through the queue index, not a page of 208 candidates'
);

select is(
    (select count(*) from runlane.runs where lease_owner = 'w1' and state = 'running'),
    100::bigint,
    'w1 is at its bound'
);

select * from finish();
rollback;
