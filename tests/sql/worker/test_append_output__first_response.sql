-- append_output: only the first visible output sets first_response_at and returns the
-- run.first_response timing row; invisible kinds never do.
begin;
select plan(22);

do $$ begin perform runlane_test.agent('agent-a'); end $$;

-- Each invisible kind leaves first_response_at null and returns null.
create temp table invisible_run on commit drop as
select runlane_test.queued_run('agent-a', 'interactive', 'interactive') as run_id;
create temp table invisible_fence on commit drop as
select runlane_test.claimed((select run_id from invisible_run)) as fence;

select is(
    runlane.append_output((select run_id from invisible_run), (select fence from invisible_fence), 'reasoning', 'r'),
    null, 'a reasoning output returns no timing row'
);
select is(
    runlane.append_output((select run_id from invisible_run), (select fence from invisible_fence), 'placeholder', 'p'),
    null, 'a placeholder output returns no timing row'
);
select is(
    runlane.append_output((select run_id from invisible_run), (select fence from invisible_fence), 'progress', 'g'),
    null, 'a progress output returns no timing row'
);
select is(
    runlane.append_output((select run_id from invisible_run), (select fence from invisible_fence), 'metadata', 'm'),
    null, 'a metadata output returns no timing row'
);
select is(
    (select first_response_at from runlane.runs where run_id = (select run_id from invisible_run)),
    null,
    'after reasoning, placeholder, progress and metadata outputs the run has no first response'
);
select is(
    (select count(*)::int from runlane.run_outputs where run_id = (select run_id from invisible_run)),
    4,
    'invisible outputs are stored all the same'
);

-- Each visible kind sets it (one fresh run per kind).
create temp table visible_kinds on commit drop as
select
    k.kind,
    runlane_test.queued_run('agent-a', 'interactive', 'interactive') as run_id
from unnest(array['text', 'final', 'message_tool', 'card']) as k (kind);
create temp table visible_results on commit drop as
select
    v.kind,
    v.run_id,
    runlane.append_output(v.run_id, runlane_test.claimed(v.run_id), v.kind, 'hello') as timing
from visible_kinds as v;

create temp table visible_stamps on commit drop as
select
    v.kind,
    r.first_response_at
from visible_results as v inner join runlane.runs as r on v.run_id = r.run_id;

select is(
    (select first_response_at is not null from visible_stamps where kind = 'text'),
    true,
    'a text output sets first_response_at'
);
select is(
    (select first_response_at is not null from visible_stamps where kind = 'final'),
    true,
    'a final output sets first_response_at'
);
select is(
    (select first_response_at is not null from visible_stamps where kind = 'message_tool'),
    true,
    'a message_tool output sets first_response_at'
);
select is(
    (select first_response_at is not null from visible_stamps where kind = 'card'),
    true,
    'a card output sets first_response_at'
);
select is(
    (select count(*)::int from visible_results where timing ->> 'event' = 'run.first_response'),
    4, 'each first visible output returns the run.first_response timing row'
);
select is(
    (select count(*)::int from visible_results where (timing ->> 'run.id')::bigint = run_id),
    4, 'the timing row is the run''s own'
);
select ok(
    (select bool_and(timing ? 'run.first_response_ms' and timing ? 'run.queue_wait_ms') from visible_results),
    'the first-response row carries first_response_ms and queue_wait_ms'
);
select ok(
    (select bool_and(not timing ? 'run.total_ms') from visible_results),
    'the first-response row of an unfinished run has no total_ms'
);

-- The first response is stamped during the attempt, after its start.
select ok(
    (
        select bool_and(r.first_response_at >= r.first_started_at)
        from visible_results inner join runlane.runs as r on visible_results.run_id = r.run_id
    ),
    'first_response_at is a clock time not earlier than the first start'
);

-- A later visible output changes nothing and returns null.
create temp table text_run on commit drop as
select
    v.run_id,
    r.first_response_at,
    r.fence
from visible_results as v inner join runlane.runs as r on v.run_id = r.run_id
where v.kind = 'text';
select is(
    runlane.append_output((select run_id from text_run), (select fence from text_run), 'text', 'more'),
    null,
    'a second visible output returns no timing row'
);
select is(
    (select first_response_at from runlane.runs where run_id = (select run_id from text_run)),
    (select first_response_at from text_run),
    'a second visible output keeps the first response time'
);

-- Invisible outputs before the first visible one: the visible one still counts first.
create temp table mixed_run on commit drop as
select runlane_test.queued_run('agent-a', 'interactive', 'interactive') as run_id;
create temp table mixed_fence on commit drop as
select runlane_test.claimed((select run_id from mixed_run)) as fence;
select is(
    runlane.append_output((select run_id from mixed_run), (select fence from mixed_fence), 'placeholder', 'thinking'),
    null,
    'a placeholder before any reply is not a response'
);
select is(
    runlane.append_output((select run_id from mixed_run), (select fence from mixed_fence), 'card', '{}') ->> 'event',
    'run.first_response',
    'the first visible output after invisible ones is the first response'
);

-- Outputs record the attempt.
select is(
    (select array_agg(distinct attempt) from runlane.run_outputs where run_id = (select run_id from mixed_run)),
    array[1],
    'outputs carry the run''s attempt number'
);

-- Argument errors.
select throws_ok(
    format(
        'select runlane.append_output(%s, %s, %L, %L)',
        (select run_id from mixed_run), (select fence from mixed_fence), 'shout', 'x'
    ),
    '22023', 'unknown output kind ''shout''', 'an unknown kind is refused with 22023'
);
select throws_ok(
    format(
        'select runlane.append_output(%s, %s, %L, null)',
        (select run_id from mixed_run), (select fence from mixed_fence), 'text'
    ),
    '22004', null, 'a null body is refused with 22004'
);

select * from finish();
rollback;
