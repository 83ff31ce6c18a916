-- A failure while notifying runlane_outputs never fails the output write: the row is
-- stored, the first response is stamped and outputs_since pages it. The notification
-- helper is replaced by a failing one inside this transaction (rolled back below).
begin;
select plan(6);

create or replace function runlane._notify_output(p_run_id bigint, p_output_id bigint)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    raise exception 'too many notifications in the NOTIFY queue (run %, output %)', p_run_id, p_output_id
        using errcode = '54000';
end;
$$;

do $$ begin perform runlane_test.agent('agent-a'); end $$;
create temp table r on commit drop as
select runlane_test.queued_run('agent-a', 'interactive', 'interactive') as run_id;
create temp table f on commit drop as
select runlane_test.claimed((select run_id from r)) as fence;

select lives_ok(
    format(
        'select runlane.append_output(%s, %s, %L, %L)', (select run_id from r), (select fence from f), 'text', 'one'
    ),
    'a visible output is written although its notification fails'
);
select lives_ok(
    format(
        'select runlane.append_output(%s, %s, %L, %L)', (select run_id from r), (select fence from f), 'progress', 'x'
    ),
    'an invisible output is written although its notification fails'
);
select is(
    (select count(*)::int from runlane.run_outputs where run_id = (select run_id from r)),
    2,
    'both output rows are stored'
);
select isnt(
    (select first_response_at from runlane.runs where run_id = (select run_id from r)),
    null,
    'the first response is stamped'
);
create temp table r2 on commit drop as
select runlane_test.queued_run('agent-a', 'interactive', 'interactive') as run_id;
select is(
    runlane.append_output(
        (select run_id from r2), runlane_test.claimed((select run_id from r2)), 'text', 'two'
    ) ->> 'event',
    'run.first_response',
    'the first visible output still returns its timing row'
);
select results_eq(
    format('select body from runlane.outputs_since(%s)', (select run_id from r)),
    $$values ('one'::text)$$,
    'a reader paging with outputs_since sees the output whose notification failed'
);

select * from finish();
rollback;
