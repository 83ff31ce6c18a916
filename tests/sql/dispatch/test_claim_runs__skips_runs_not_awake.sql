-- Runs with a wake time in the future wait; those whose wake time has passed are taken.
begin;
select plan(3);

do $$ begin perform runlane_test.agent('agent-sleeps', 'org-a'); end $$;
do $$ begin perform runlane_test.agent('agent-awake', 'org-a'); end $$;
create temp table r on commit drop as
select
    runlane_test.queued_run('agent-sleeps', 'background', 'manual', now() + interval '1 minute') as sleeping,
    runlane_test.queued_run('agent-awake', 'background', 'manual', now() - interval '1 second') as awake;

create temp table claimed on commit drop as
select run_id from runlane.claim_runs('worker-1', array['background']);

select is((select count(*) from claimed), 1::bigint, 'only one run is claimable');
select is((select run_id from claimed), (select awake from r), 'the run whose wake time passed is claimed');
select is(
    (select state || '/' || attempts || '/' || fence from runlane.runs where run_id = (select sleeping from r)),
    'queued/0/0',
    'the sleeping run is untouched'
);

select * from finish();
rollback;
