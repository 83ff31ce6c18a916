-- run_detail: a failed attempt's error class and message are stored with the run and
-- read back with its state, attempts and output counts; reason codes stay codes;
-- errors are bounded; unknown and null runs are refused.
begin;
select plan(11);

do $$ begin perform runlane_test.agent('agent-d', 'org-d'); end $$;
do $$ begin perform runlane_test.agent('agent-e', 'org-d'); end $$;
do $$ begin perform runlane_test.agent('agent-f', 'org-d'); end $$;
do $$ begin perform runlane_test.agent('agent-g', 'org-d'); end $$;
create temporary table t_runs (name text primary key, run_id bigint);
insert into t_runs (name, run_id)
select
    'chat' as name,
    s.run_id
from runlane.submit_message('agent-d', 'thread-d', 'hello') as s;
insert into t_runs values ('loop', runlane_test.queued_run('agent-e'));
insert into t_runs values ('long', runlane_test.queued_run('agent-f'));
insert into t_runs values ('fresh', runlane_test.queued_run('agent-g'));

-- The chat run's first attempt writes two outputs (one visible) and raises.
do $$
declare
    v_run bigint := (select run_id from t_runs where name = 'chat');
    v_fence bigint := runlane_test.claimed(v_run);
begin
    perform runlane.append_output(v_run, v_fence, 'text', 'partial');
    perform runlane.append_output(v_run, v_fence, 'progress', 'thinking');
    perform runlane.retry_run(v_run, v_fence, 'ValueError: model returned garbage', interval '0');
end $$;

select is(
    (
        select row(state, reason, attempts, error_class, error, visible_outputs, outputs)::text
        from runlane.run_detail((select run_id from t_runs where name = 'chat'))
    ),
    row('queued', 'retry_scheduled', 1, 'ValueError', 'model returned garbage', 1, 2)::text,
    'a retried attempt: its error class and message, the attempt and the output counts'
);
select isnt(
    (select wake_at from runlane.run_detail((select run_id from t_runs where name = 'chat'))),
    null,
    'a queued retry shows when it wakes'
);

-- Its last two attempts fail too, the last one with a multi-line message: the run fails.
do $$
declare
    v_run bigint := (select run_id from t_runs where name = 'chat');
    v_fence bigint;
begin
    v_fence := runlane_test.claimed(v_run);
    perform runlane.retry_run(v_run, v_fence, 'TimeoutError: provider slow', interval '0');
    v_fence := runlane_test.claimed(v_run);
    perform runlane.retry_run(
        v_run, v_fence, E'httpx.HTTPStatusError: 500\nbody: oops', interval '0'
    );
end $$;

select is(
    (
        select row(state, reason, attempts, max_attempts, error_class, error)::text
        from runlane.run_detail((select run_id from t_runs where name = 'chat'))
    ),
    row('failed', 'attempts_exhausted', 3, 3, 'httpx.HTTPStatusError', E'500\nbody: oops')::text,
    'the failed run keeps the last attempt''s error: a dotted class, a message over lines'
);
select ok(
    (
        select finished_at is not null and total_ms is not null and queue_wait_ms is not null
        from runlane.run_detail((select run_id from t_runs where name = 'chat'))
    ),
    'a finished run has its finish time, total and queue wait'
);
select is(
    (
        select row(d.queue_wait_ms, d.first_response_ms, d.total_ms)::text
        from runlane.run_detail((select run_id from t_runs where name = 'chat')) as d
    ),
    (
        select
            row(
                (t ->> 'run.queue_wait_ms')::bigint,
                (t ->> 'run.first_response_ms')::bigint,
                (t ->> 'run.total_ms')::bigint
            )::text
        from runlane.run_timing((select run_id from t_runs where name = 'chat')) as t
    ),
    'its durations are run_timing''s, measured from the same origin'
);

-- A reason code (the runner's iteration cap) is no exception: no class.
do $$
declare
    v_run bigint := (select run_id from t_runs where name = 'loop');
begin
    perform runlane.finish_run(v_run, runlane_test.claimed(v_run), 'failed', 'iteration_cap');
end $$;
select is(
    (
        select row(state, reason, error_class, error)::text
        from runlane.run_detail((select run_id from t_runs where name = 'loop'))
    ),
    row('failed', 'iteration_cap', null, 'iteration_cap')::text,
    'a reason code is shown as the error with no class'
);

-- An error of 5,000 characters is stored as its first 1,000.
do $$
declare
    v_run bigint := (select run_id from t_runs where name = 'long');
begin
    perform runlane.retry_run(
        v_run, runlane_test.claimed(v_run), 'RuntimeError: ' || repeat('x', 4986), interval '0'
    );
end $$;
select is(
    (select char_length(last_error) from runlane.runs where run_id = (select run_id from t_runs where name = 'long')),
    1000,
    'retry_run stores at most 1,000 characters of the error'
);
do $$
declare
    v_run bigint := (select run_id from t_runs where name = 'long');
begin
    perform runlane.finish_run(
        v_run, runlane_test.claimed(v_run), 'failed', 'RuntimeError: ' || repeat('y', 4986)
    );
end $$;
select is(
    (
        select row(error_class, char_length(error))::text
        from runlane.run_detail((select run_id from t_runs where name = 'long'))
    ),
    row('RuntimeError', 1000 - char_length('RuntimeError: '))::text,
    'finish_run stores at most 1,000 characters of the error too'
);

-- A run that never failed has no error.
select is(
    (
        select row(state, error_class, error)::text
        from runlane.run_detail((select run_id from t_runs where name = 'fresh'))
    ),
    row('queued', null, null)::text,
    'a run without a failed attempt shows no error'
);

select throws_ok(
    $$select * from runlane.run_detail(987654321)$$,
    'RL008', null, 'an unknown run is refused with RL008'
);
select throws_ok(
    $$select * from runlane.run_detail(null)$$,
    '22004', null, 'a null run id is refused with 22004'
);

select * from finish();
rollback;
