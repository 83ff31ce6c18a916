-- With the per-worker bound (runlane.max_per_org), a claim reads an organization's queued
-- runs no further than the room it has on the worker: a page of 100 for an organization
-- with room for 10 fetches about 10 runs through runs_fair_claim_idx, not the 2 x 100 + 8
-- candidates a page reads without the bound (issue 15: a worker at its bound in a
-- one-tenant drain read that many rows to lock the 40-odd it had room for).
begin;
select plan(3);

do $$
begin
    perform runlane_test.org('org-a', 1000);
    perform runlane_test.agent('a-1', 'org-a');
end
$$;

-- w1 already runs 90 of org-a's runs (inserted running: the queue's index holds only the
-- 400 queued ones, so what the claim reads of it is what it counts).
insert into runlane.runs (
    org_id, agent_id, lane, trigger, thread_id, prompt, model,
    state, lease_owner, lease_expires_at, heartbeat_at, fence, attempts, first_started_at
)
select
    'org-a' as org_id,
    'a-1' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    'held-' || g as thread_id,
    'x' as prompt,
    'noop' as model,
    'running' as state,
    'w1' as lease_owner,
    now() + interval '1 hour' as lease_expires_at,
    now() as heartbeat_at,
    1 as fence,
    1 as attempts,
    now() as first_started_at
from generate_series(1, 90) as g;

insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model)
select
    'org-a' as org_id,
    'a-1' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    't-' || g as thread_id,
    'x' as prompt,
    'noop' as model
from generate_series(1, 150) as g;

-- (statistics of this queue, as a drain's autoanalyze would have them)
analyze runlane.runs;

do $$
begin
    perform set_config('runlane.max_per_org', '100', true);  -- this transaction's claims
    perform set_config('runlane.claim_skip_window', 'on', true);  -- the loose scan first
end
$$;

create temp table before_claim on commit drop as
select pg_stat_get_xact_tuples_fetched('runlane.runs_fair_claim_idx'::regclass) as entries;

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
    pg_stat_get_xact_tuples_fetched('runlane.runs_fair_claim_idx'::regclass)
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
