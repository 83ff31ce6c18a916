-- cancel_run on a running run: it stays running with the request recorded and answers
-- 'running'; from then on it writes nothing (RL001), its heartbeat answers false, and its
-- finish closes it canceled, freeing its computer and journaling run.finished.
begin;
select plan(16);

do $$ begin perform runlane_test.agent('agent-s', 'org-s', 'computer-s'); end $$;
create temp table r on commit drop as
select runlane_test.queued_run('agent-s') as run_id;
create temp table f on commit drop as
select runlane_test.claimed((select run_id from r)) as fence;

select is(runlane.cancel_run((select run_id from r)), 'running', 'a running run answers running');
select results_eq(
    $$select state, reason from runlane.runs where run_id = (select run_id from r)$$,
    $$values ('running'::text, 'cancel_requested'::text)$$,
    'the run is still running with the request recorded'
);
select is(runlane.cancel_run((select run_id from r)), 'running', 'a second Stop answers running again');
select is(
    (
        select count(*)::int from runlane.run_events
        where run_id = (select run_id from r) and event = 'run.cancel_requested'
    ),
    1,
    'the request is journaled once'
);
select is(
    runlane.heartbeat((select run_id from r), (select fence from f)), false,
    'its heartbeat answers false: the worker stops the agent'
);
select throws_ok(
    $$select runlane.append_output((select run_id from r), (select fence from f), 'text', 'late')$$,
    'RL001', null, 'no output is written after the Stop'
);
select throws_ok(
    $$select runlane.append_output((select run_id from r), (select fence from f), 'text', 'late', 1)$$,
    'RL001', null, 'nor with a write sequence number'
);
select throws_ok(
    $$select runlane.save_checkpoint((select run_id from r), (select fence from f), '{}'::jsonb)$$,
    'RL001', null, 'no checkpoint is saved after the Stop'
);
select lives_ok(
    $$select runlane.charge((select run_id from r), (select fence from f), 0.5)$$,
    'spend already incurred is still charged'
);
select results_eq(
    $$select ok, sqlstate from runlane.finish_runs(
        array[(select run_id from r)], array[(select fence from f)], array['succeeded'],
        array[null::text], array[0::numeric], array[1], array['text'], array['late'], array[null::bigint])$$,
    $$values (false, 'RL001'::text)$$,
    'a batched finish carrying outputs is refused with RL001 and writes nothing'
);
select is(
    (select count(*)::int from runlane.run_outputs where run_id = (select run_id from r)),
    0,
    'no output row exists'
);
select is(
    (select state from runlane.runs where run_id = (select run_id from r)), 'running',
    'the refused writes left the run running'
);
select lives_ok(
    $$select runlane.finish_run((select run_id from r), (select fence from f), 'succeeded')$$,
    'its worker finishes it'
);
select results_eq(
    $$select state, reason from runlane.runs where run_id = (select run_id from r)$$,
    $$values ('canceled'::text, 'canceled'::text)$$,
    'the finish closes it canceled, whatever the last step reported'
);
select is(
    (select count(*)::int from runlane.computer_leases where computer_id = 'computer-s'),
    0,
    'its computer is freed'
);
select results_eq(
    $$select detail ->> 'outcome', detail ->> 'reason' from runlane.run_events
      where run_id = (select run_id from r) and event = 'run.finished'$$,
    $$values ('canceled'::text, 'canceled'::text)$$,
    'run.finished is journaled with outcome canceled'
);

select * from finish();
rollback;
