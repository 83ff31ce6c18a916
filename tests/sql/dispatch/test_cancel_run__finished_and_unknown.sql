-- cancel_run on a finished run leaves it as it is and answers its state; an unknown run is
-- RL008, a null id 22004.
begin;
select plan(6);

do $$ begin perform runlane_test.agent('agent-d', 'org-d'); end $$;
create temp table r on commit drop as select runlane_test.queued_run('agent-d') as run_id;
create temp table f on commit drop as select runlane_test.claimed((select run_id from r)) as fence;
do $$ begin perform runlane.finish_run((select run_id from r), (select fence from f), 'succeeded'); end $$;

select is(runlane.cancel_run((select run_id from r)), 'succeeded', 'a succeeded run answers succeeded');
select results_eq(
    $$select state, reason from runlane.runs where run_id = (select run_id from r)$$,
    $$values ('succeeded'::text, null::text)$$,
    'and is left as it is'
);
select is(
    (
        select count(*)::int
        from runlane.run_events where
            run_id = (select run_id from r)
            and event in ('run.finished', 'run.cancel_requested')
    ),
    1,
    'nothing is journaled for it'
);
select is(
    runlane.cancel_run((runlane.run_now('agent-d')).run_id), 'canceled',
    'a queued run of the same agent is canceled'
);
select throws_ok($$select runlane.cancel_run(-42)$$, 'RL008', 'unknown run -42', 'an unknown run is RL008');
select throws_ok($$select runlane.cancel_run(null)$$, '22004', null, 'a null run id is 22004');

select * from finish();
rollback;
