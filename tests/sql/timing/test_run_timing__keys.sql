-- run_timing: durations present exactly when their timestamps exist, never zero-filled.
begin;
select plan(17);

do $$ begin perform runlane_test.agent('agent-a'); end $$;
create temp table s on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'secret words');

-- Queued: only the pre-run wait exists.
select is(
    (select array_agg(k order by k) from jsonb_object_keys(runlane.run_timing((select run_id from s))) as k),
    array['run.attempt', 'run.id', 'run.lane', 'run.pre_run_wait_ms', 'run.trigger'],
    'a queued run has only id, lane, trigger, attempt and pre_run_wait (no queue_wait, first_response, total)'
);
select is(
    runlane.run_timing((select run_id from s)) -> 'run.id',
    to_jsonb((select run_id from s)),
    'run.id is the run'
);
select is(
    runlane.run_timing((select run_id from s)) ->> 'run.lane',
    'interactive',
    'run.lane is the run''s lane'
);
select is(
    runlane.run_timing((select run_id from s)) ->> 'run.trigger',
    'interactive',
    'run.trigger is the run''s trigger'
);
select is(
    runlane.run_timing((select run_id from s)) -> 'run.attempt',
    '0'::jsonb,
    'run.attempt is the number of claims so far'
);

-- Fixed timestamps so every duration is known exactly.
update runlane.messages set created_at = '2030-01-01 00:00:00+00'
where message_id = (select message_id from s);
update runlane.runs
set
    created_at = '2030-01-01 00:00:01.2344+00', state = 'running', attempts = 1, fence = 1,
    first_started_at = '2030-01-01 00:00:03.5+00'
where run_id = (select run_id from s);

select is(
    runlane.run_timing((select run_id from s)) -> 'run.pre_run_wait_ms',
    '1234'::jsonb,
    'pre_run_wait_ms runs from the source message to run creation, rounded to whole ms'
);
select is(
    runlane.run_timing((select run_id from s)) -> 'run.queue_wait_ms',
    '2266'::jsonb,
    'queue_wait_ms runs from run creation to the first start (rounded)'
);
select ok(
    not runlane.run_timing(
        (select run_id from s)) ?| array[
        'run.first_response_ms', 'run.total_ms',
        'run.execution_wall_ms', 'run.outcome'
    ],
    'a running run without a reply has no first_response, total, execution_wall or outcome'
);

update runlane.runs set first_response_at = '2030-01-01 00:00:04+00'
where run_id = (select run_id from s);
select is(
    runlane.run_timing((select run_id from s)) -> 'run.first_response_ms',
    '4000'::jsonb,
    'first_response_ms runs from the source message to the first visible reply'
);

update runlane.runs set state = 'succeeded', finished_at = '2030-01-01 00:00:10+00'
where run_id = (select run_id from s);
select is(
    runlane.run_timing((select run_id from s)) -> 'run.total_ms',
    '10000'::jsonb,
    'total_ms runs from the source message to completion'
);
select is(
    runlane.run_timing((select run_id from s)) -> 'run.execution_wall_ms',
    '6500'::jsonb,
    'execution_wall_ms runs from the first start to completion'
);
select is(
    runlane.run_timing((select run_id from s)) ->> 'run.outcome',
    'succeeded',
    'a finished run has run.outcome = its terminal state'
);
select is(
    jsonb_typeof(runlane.run_timing((select run_id from s)) -> 'run.total_ms'),
    'number',
    'durations are JSON numbers'
);

-- A failed run that never produced a reply: total present, first_response absent.
update runlane.runs set state = 'failed', first_response_at = null
where run_id = (select run_id from s);
select ok(
    runlane.run_timing((select run_id from s)) ? 'run.total_ms'
    and not runlane.run_timing((select run_id from s)) ? 'run.first_response_ms',
    'a failed run without a reply reports total_ms but no first_response_ms (absent, not zero)'
);
select is(
    runlane.run_timing((select run_id from s)) ->> 'run.outcome',
    'failed',
    'run.outcome distinguishes failed work'
);

-- No text or identifiers.
select ok(
    runlane.run_timing((select run_id from s))::text !~ '(secret words|agent-a|thread-1|org-a|owner|Summarize|test-model)',
    'the timing row carries no message text, prompt, model or agent/org/thread/owner identifiers'
);

select throws_ok(
    $$select runlane.run_timing(-1)$$,
    'RL008', null, 'run_timing of an unknown run is refused with RL008'
);

select * from finish();
rollback;
