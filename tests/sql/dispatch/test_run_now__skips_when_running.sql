-- run_now: a queued manual background run when the agent is free; a journaled skipped
-- run (already_running) when it has an unfinished run.
begin;
select plan(10);

do $$ begin perform runlane_test.scheduled_agent('agent-r', 'daily at 09:00', null, 'UTC', 'org-r'); end $$;
update runlane.agents set thread_id = 'thread-r' where agent_id = 'agent-r';

create temporary table first_run on commit drop as
select * from runlane.run_now('agent-r');

select results_eq(
    $$select lane, trigger, state, prompt, model, thread_id, timer_routine from first_run$$,
    $$values ('background'::text, 'manual'::text, 'queued'::text, null::text,
              'test-model'::text, 'thread-r'::text, null::text)$$,
    'a free agent gets a queued, unmarked background run with trigger manual (no prompt returned)'
);
select is(
    (select r.prompt from runlane.runs as r inner join first_run as f on r.run_id = f.run_id),
    'Summarize the day',
    'the run itself carries the agent''s prompt for its worker'
);

create temporary table second_run on commit drop as
select * from runlane.run_now('agent-r');

select results_eq(
    $$select trigger, state, reason, finished_at is not null from second_run$$,
    $$values ('manual'::text, 'skipped'::text, 'already_running'::text, true)$$,
    'with a queued run, run_now returns a finished skipped run with reason already_running'
);
select is(
    (select count(*)::int from runlane.runs as r inner join second_run as s on r.run_id = s.run_id),
    1,
    'the skipped run is a row of runs'
);
select results_eq(
    $$
    select e.event, e.detail ->> 'reason'
    from runlane.run_events as e inner join second_run as s on e.run_id = s.run_id
    $$,
    $$values ('run.skipped'::text, 'already_running'::text)$$,
    'the skip is visible in the journal'
);

do $$ begin perform runlane_test.claimed((select run_id from first_run)); end $$;
select is(
    (runlane.run_now('agent-r')).reason, 'already_running',
    'a running run also makes run_now skip'
);
select is(
    (select count(*)::int from runlane.runs where agent_id = 'agent-r' and state in ('queued', 'running')),
    1,
    'the agent still has exactly one unfinished run'
);

update runlane.runs set state = 'succeeded', finished_at = now() where run_id = (select run_id from first_run);
select is((runlane.run_now('agent-r')).state, 'queued', 'once the run finished, run_now queues a new run');

do $$ begin perform runlane_test.scheduled_agent('agent-other', '', null, 'UTC', 'org-r'); end $$;
select is(
    (runlane.run_now('agent-other')).state, 'queued',
    'another agent''s unfinished run does not block this one'
);
select throws_ok($$select runlane.run_now(null)$$, '22004', null, 'a missing agent id is refused');

select * from finish();
rollback;
