-- The claim builds each run's run.execution_started row from the claimed row in hand:
-- it is exactly run_timing of the run plus the event, for a chat run (timed from its
-- source message) and a background run (timed from its creation); a timer run's late
-- notice is still computed, the others' is null.
begin;
select plan(3);

do $$
begin
    perform runlane_test.agent('agent-chat', 'org-t');
    perform runlane_test.agent('agent-bg', 'org-t');
    perform runlane.submit_message('agent-chat', 'thread-1', 'hello');
    perform runlane_test.queued_run('agent-bg', 'background', 'manual');
end
$$;

create temp table claimed on commit drop as
select
    c.run_id,
    c.timing,
    c.late_notice
from runlane.claim_runs('w1', array['interactive', 'background'], 10) as c;

select results_eq(
    $$ select c.run_id, c.timing from claimed as c order by c.run_id $$,
    $$
    select c.run_id, runlane.run_timing(c.run_id) || '{"event": "run.execution_started"}'::jsonb
    from claimed as c order by c.run_id
    $$,
    'each timing row is run_timing of the claimed run plus the event'
);

select is(
    (select count(*) from claimed where timing ? 'run.pre_run_wait_ms' and timing ? 'run.queue_wait_ms'),
    2::bigint,
    'both rows carry their waits'
);

select is(
    (select count(*) from claimed where late_notice is not null),
    0::bigint,
    'runs that are not timer runs carry no late notice'
);

select * from finish();
rollback;
