-- append_output refuses a fenced-out or finished owner and unknown runs.
begin;
select plan(6);

do $$ begin perform runlane_test.agent('agent-a'); end $$;
create temp table r on commit drop as
select runlane_test.queued_run('agent-a', 'interactive', 'interactive') as run_id;
select throws_ok(
    format('select runlane.append_output(%s, 0, %L, %L)', (select run_id from r), 'text', 'x'),
    'RL001', null, 'a queued (unclaimed) run refuses output (RL001)'
);
create temp table f on commit drop as
select runlane_test.claimed((select run_id from r)) as fence;
do $$ begin perform runlane_test.claimed((select run_id from r)); end $$;

select throws_ok(
    format('select runlane.append_output(%s, %s, %L, %L)', (select run_id from r), (select fence from f), 'text', 'x'),
    'RL001', null, 'after a re-claim, the old owner cannot append output (RL001)'
);
select is(
    (select count(*)::int from runlane.run_outputs where run_id = (select run_id from r)),
    0,
    'the refused output was not stored'
);
select is(
    (select first_response_at from runlane.runs where run_id = (select run_id from r)),
    null,
    'a refused output does not stamp a first response'
);

update runlane.runs set state = 'succeeded', finished_at = now()
where run_id = (select run_id from r);
select throws_ok(
    format('select runlane.append_output(%s, %s, %L, %L)', (select run_id from r), (select fence + 1 from f), 'text', 'x'),
    'RL001', null, 'a finished run refuses output even with the current fence (RL001)'
);
select throws_ok(
    $$select runlane.append_output(-1, 1, 'text', 'x')$$,
    'RL008', null, 'append_output on an unknown run is refused with RL008'
);

select * from finish();
rollback;
