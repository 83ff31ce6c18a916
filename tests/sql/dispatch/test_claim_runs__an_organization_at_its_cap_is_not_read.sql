-- An organization at its background cap is stepped over, not read: org-a runs its one
-- allowed background run and has 1,000 more queued; a background claim takes org-b's run
-- without reading org-a's queued runs one by one (the window of the oldest runs, in run
-- order, would filter them all on every claim).
begin;
select plan(3);

do $$
begin
    perform runlane_test.org('org-a', 1);
    perform runlane_test.org('org-b', 4);
    perform runlane_test.agent('a-' || g, 'org-a') from generate_series(0, 1000) as g;
    perform runlane_test.agent('b-1', 'org-b');
end
$$;

-- org-a's one background run is running: its cap of 1 is reached.
insert into runlane.runs (
    org_id, agent_id, lane, trigger, prompt, model,
    state, lease_owner, lease_expires_at, heartbeat_at, fence, attempts, first_started_at
)
values (
    'org-a', 'a-0', 'background', 'scheduled', 'x', 'test-model',
    'running', 'w0', now() + interval '1 hour', now(), 1, 1, now()
);

insert into runlane.runs (org_id, agent_id, lane, trigger, prompt, model)
select
    'org-a' as org_id,
    'a-' || g as agent_id,
    'background' as lane,
    'scheduled' as trigger,
    'x' as prompt,
    'test-model' as model
from generate_series(1, 1000) as g;

insert into runlane.runs (org_id, agent_id, lane, trigger, prompt, model)
values ('org-b', 'b-1', 'background', 'scheduled', 'x', 'test-model');

-- (statistics of this queue, as a drain's autoanalyze would have them)
analyze runlane.runs;

do $$
begin
    perform set_config('runlane.claim_skip_window', 'off', true);  -- a fresh session
end
$$;

create temp table before_claim on commit drop as
select pg_stat_get_xact_tuples_fetched('runlane.runs_handler_claim_order_idx'::regclass) as fetched;

select is(
    (select array_agg(c.org_id) from runlane.claim_runs('w1', array['background'], 10) as c),
    array['org-b'],
    'a background claim takes org-b''s run: org-a is at its cap'
);

select cmp_ok(
    pg_stat_get_xact_tuples_fetched('runlane.runs_handler_claim_order_idx'::regclass)
    - (select b.fetched from before_claim as b),
    '<=',
    50::bigint,
    'without fetching org-a''s 1,000 queued runs one by one'
);

select is(
    (select count(*) from runlane.runs where org_id = 'org-a' and state = 'queued'),
    1000::bigint,
    'org-a''s runs stay queued'
);

select * from finish();
rollback;
