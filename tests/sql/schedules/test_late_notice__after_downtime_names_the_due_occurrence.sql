-- A pending timer run claimed right after downtime, before tick moved its marker, is told
-- how late it is against the routine's most recent occurrence due at its start (not the
-- stale marker), in the routine's zone; the marker moves with it, and the agent's next
-- slot too, so tick neither fires nor skips that occurrence again.
begin;
select plan(10);

do $$
declare
    v_run bigint;
    v_time text := to_char((now() - interval '20 minutes') at time zone 'Europe/Berlin', 'HH24:MI');
begin
    -- every hour on a grid whose slots were 200, 140, 80 and 20 minutes ago; the worker
    -- fleet was down: the marker still names the slot 200 minutes ago, next_run_at the next
    perform runlane_test.scheduled_agent('agent-down', 'every hour', 'Europe/Berlin');
    update runlane.agents set schedule_anchor = now() - interval '200 minutes'
    where agent_id = 'agent-down';
    perform runlane_test.due('agent-down', now() - interval '140 minutes');
    v_run := runlane_test.queued_run('agent-down', 'background', 'scheduled');
    update runlane.runs
    set timer_routine = 'agent-down', timer_occurrence = now() - interval '200 minutes',
        timer_timezone = 'Europe/Berlin', created_at = now() - interval '200 minutes'
    where run_id = v_run;

    -- daily at the Berlin wall time of 20 minutes ago; the marker is yesterday's slot
    perform runlane_test.scheduled_agent('agent-daily', 'daily at ' || v_time, 'Europe/Berlin');
    v_run := runlane_test.queued_run('agent-daily', 'background', 'scheduled');
    update runlane.runs
    set timer_routine = 'agent-daily',
        timer_occurrence = date_trunc('minute', now() - interval '20 minutes') - interval '1 day',
        timer_timezone = 'Europe/Berlin'
    where run_id = v_run;
    perform runlane_test.due('agent-daily', date_trunc('minute', now() - interval '20 minutes'));
end $$;

create temporary table claimed on commit drop as
select
    c.agent_id,
    c.late_notice
from runlane.claim_runs('worker-late', array['background'], 10) as c;

select is(
    (select (late_notice ->> 'late_by_minutes')::int from claimed where agent_id = 'agent-down'),
    20,
    'the run is 20 minutes late against the slot due at its start, not 200 against the stale marker'
);

select is(
    (select late_notice ->> 'scheduled_for' from claimed where agent_id = 'agent-down'),
    (
        select
            to_char((now() - interval '20 minutes') at time zone 'Europe/Berlin', 'YYYY-MM-DD HH24:MI ')
            || (select abbrev from pg_timezone_names where name = 'Europe/Berlin')
    ),
    'the notice names that occurrence in the routine''s zone'
);

select results_eq(
    $$select timer_occurrence, timer_timezone from runlane.runs where agent_id = 'agent-down'$$,
    $$values (now() - interval '20 minutes', 'Europe/Berlin'::text)$$,
    'the run''s marker moved to the occurrence it was measured against'
);

select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-down'),
    now() + interval '40 minutes',
    'the agent''s next slot moved past that occurrence, as tick''s coalescing would have done'
);

select is(
    (select (late_notice ->> 'late_by_minutes')::int from claimed where agent_id = 'agent-daily'),
    20,
    'a daily routine is measured against today''s slot in Berlin, not yesterday''s'
);

select is(
    (select timer_occurrence from runlane.runs where agent_id = 'agent-daily'),
    date_trunc('minute', now() - interval '20 minutes'),
    'and its marker moved to today''s slot'
);

select is(
    (select late_notice ->> 'timezone' from claimed where agent_id = 'agent-daily'),
    'Europe/Berlin',
    'the notice is in the routine''s zone'
);

select is_empty(
    $$select * from runlane.tick(now()) where agent_id in ('agent-down', 'agent-daily')$$,
    'the next tick neither fires nor skips (tick_failed) the occurrences the runs took'
);

select is(
    (select count(*)::int from runlane.runs where agent_id in ('agent-down', 'agent-daily')),
    2,
    'no other run was written for those agents'
);

-- a run claimed within 15 minutes of the due slot is on time, stale marker or not
do $$
declare
    v_run bigint;
begin
    perform runlane_test.scheduled_agent('agent-fresh', 'every hour', 'Europe/Berlin');
    update runlane.agents set schedule_anchor = now() - interval '130 minutes'
    where agent_id = 'agent-fresh';
    v_run := runlane_test.queued_run('agent-fresh', 'background', 'scheduled');
    update runlane.runs
    set timer_routine = 'agent-fresh', timer_occurrence = now() - interval '130 minutes',
        timer_timezone = 'Europe/Berlin'
    where run_id = v_run;
end $$;
select is(
    (
        select c.late_notice from runlane.claim_runs('worker-late', array['background'], 10) as c
        where c.agent_id = 'agent-fresh'
    ),
    null,
    'a stale marker alone does not make a run late: the slot due 10 minutes ago is on time'
);

select * from finish();
rollback;
