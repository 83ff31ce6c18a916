-- A claim takes a queued run with a fence, an attempt, a lease and its start time.
begin;
select plan(12);

do $$ begin perform runlane_test.agent('agent-a', 'org-a'); end $$;
update runlane.platform_settings set agent_iteration_cap = 7 where org_id = 'org-a';
create temp table queued on commit drop as
select runlane_test.queued_run('agent-a') as run_id;

create temp table claimed on commit drop as
select * from runlane.claim_runs('worker-1', array['background'], 10, interval '45 seconds');

select is((select count(*) from claimed), 1::bigint, 'the queued run is claimed');
select is((select run_id from claimed), (select run_id from queued), 'the claimed run is the queued one');
select is((select fence from claimed), 1::bigint, 'the first claim hands out fence 1');
select is((select attempt from claimed), 1, 'the first claim is attempt 1');
select is((select iteration_cap from claimed), 7, 'the iteration cap comes from the organization settings');
select is(
    (select state || '/' || lease_owner from runlane.runs where run_id = (select run_id from queued)),
    'running/worker-1',
    'the run is running and leased to the claiming worker'
);
select is(
    (select lease_expires_at from runlane.runs where run_id = (select run_id from queued)),
    now() + interval '45 seconds',
    'the lease lasts as long as asked'
);
select isnt(
    (select first_started_at from runlane.runs where run_id = (select run_id from queued)),
    null,
    'the first start is recorded'
);
select is(
    (select timing ->> 'event' from claimed),
    'run.execution_started',
    'the claim returns the run.execution_started timing row'
);
select is(
    (select count(*) from runlane.run_events where run_id = (select run_id from queued) and event = 'run.claimed'),
    1::bigint,
    'the claim is journaled'
);
select is(
    (select count(*) from runlane.claim_runs('worker-2', array['background'])),
    0::bigint,
    'a claimed run is not handed out again'
);
select is(
    (select late_notice from claimed),
    null,
    'a run that is not a late timer run has no late notice'
);

select * from finish();
rollback;
