-- An organization the claim leaves out (at the per-worker bound, runlane.max_per_org) is
-- stepped over, not read: a worker at its bound for org-a, whose backlog is 2,000 runs,
-- takes org-b's one queued run without reading org-a's runs one by one (the window of the
-- oldest runs, in run order, used to filter them all on every claim).
begin;
select plan(3);

do $$
begin
    perform runlane_test.org('org-a', 1000);
    perform runlane_test.agent('a-1', 'org-a');
    perform runlane_test.org('org-b', 1000);
    perform runlane_test.agent('b-1', 'org-b');
end
$$;

-- w1 runs 5 of org-a's runs: its bound of 5 is reached.
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
from generate_series(1, 5) as g;

insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model)
select
    'org-a' as org_id,
    'a-1' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    't-' || g as thread_id,
    'x' as prompt,
    'noop' as model
from generate_series(1, 2000) as g;

insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model)
values ('org-b', 'b-1', 'interactive', 'interactive', 'b-thread', 'x', 'noop');

-- (statistics of this queue, as a drain's autoanalyze would have them)
analyze runlane.runs;

do $$
begin
    perform set_config('runlane.max_per_org', '5', true);  -- this transaction's claims
    perform set_config('runlane.claim_skip_window', 'off', true);  -- a fresh session
end
$$;

create temp table before_claim on commit drop as
select pg_stat_get_xact_tuples_fetched('runlane.runs_claim_order_idx'::regclass) as fetched;

select is(
    (select array_agg(c.org_id) from runlane.claim_runs('w1', array['interactive'], 10) as c),
    array['org-b'],
    'w1, at its bound for org-a, takes org-b''s run'
);

select cmp_ok(
    pg_stat_get_xact_tuples_fetched('runlane.runs_claim_order_idx'::regclass)
    - (select b.fetched from before_claim as b),
    '<=',
    50::bigint,
    'without fetching org-a''s 2,000 queued runs one by one'
);

select is(
    (select count(*) from runlane.runs where org_id = 'org-a' and state = 'queued'),
    2000::bigint,
    'org-a''s runs stay queued'
);

select * from finish();
rollback;
