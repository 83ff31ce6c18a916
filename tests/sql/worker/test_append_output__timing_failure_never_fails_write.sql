-- A failure while computing the timing row never fails the output write.
-- run_timing is replaced by a failing one inside this transaction (rolled back below).
begin;
select plan(4);

create or replace function runlane.run_timing(p_run_id bigint)
returns jsonb
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    raise exception 'timing is broken for run %', p_run_id using errcode = 'XX000';
end;
$$;

do $$ begin perform runlane_test.agent('agent-a'); end $$;
create temp table r on commit drop as
select runlane_test.queued_run('agent-a', 'interactive', 'interactive') as run_id;
create temp table f on commit drop as
select runlane_test.claimed((select run_id from r)) as fence;

select lives_ok(
    format('select runlane.append_output(%s, %s, %L, %L)', (select run_id from r), (select fence from f), 'text', 'hi'),
    'the first visible output is written even when timing fails'
);
select is(
    (select count(*)::int from runlane.run_outputs where run_id = (select run_id from r)),
    1,
    'the output row is stored'
);
select isnt(
    (select first_response_at from runlane.runs where run_id = (select run_id from r)),
    null,
    'the first response is still stamped'
);
create temp table r2 on commit drop as
select runlane_test.queued_run('agent-a', 'interactive', 'interactive') as run_id;
select is(
    runlane.append_output(
        (select run_id from r2), runlane_test.claimed((select run_id from r2)), 'card', '{}'
    ),
    null,
    'when timing fails the first visible output returns NULL instead of raising'
);

select * from finish();
rollback;
