-- run_status: state, reason, attempt, the newest visible output and finished_at, for a
-- queued, running, stopping, succeeded and canceled run; RL008 for an unknown run.
begin;
select plan(7);

do $$ begin perform runlane_test.agent('agent-t', 'org-t'); end $$;
create temp table r on commit drop as select runlane_test.queued_run('agent-t') as run_id;

select results_eq(
    $$select state, reason, attempt, last_output_id, finished_at from runlane.run_status((select run_id from r))$$,
    $$values ('queued'::text, null::text, 0, null::bigint, null::timestamptz)$$,
    'a queued run: no attempt, no output, not finished'
);

create temp table f on commit drop as select runlane_test.claimed((select run_id from r)) as fence;
create temp table o on commit drop as
select runlane.append_output((select run_id from r), (select fence from f), 'text', 'one') as t;
do $$ begin perform runlane.append_output((select run_id from r), (select fence from f), 'text', 'two'); end $$;
do $$ begin perform runlane.append_output((select run_id from r), (select fence from f), 'reasoning', 'hidden'); end $$;

select results_eq(
    $$select state, attempt, last_output_id, finished_at from runlane.run_status((select run_id from r))$$,
    $$select 'running'::text, 1, (select max(output_id) from runlane.run_outputs
        where run_id = (select run_id from r) and kind = 'text'), null::timestamptz$$,
    'a running run: its attempt and newest VISIBLE output (the hidden one is not counted)'
);
select is(
    (select last_output_id from runlane.run_status((select run_id from r))),
    (select max(o.output_id) from runlane.outputs_since((select run_id from r)) as o),
    'last_output_id is the last row outputs_since pages'
);

do $$ begin perform runlane.cancel_run((select run_id from r)); end $$;
select results_eq(
    $$select state, reason from runlane.run_status((select run_id from r))$$,
    $$values ('running'::text, 'cancel_requested'::text)$$,
    'a run whose Stop is on its way: running, reason cancel_requested'
);

do $$ begin perform runlane.finish_run((select run_id from r), (select fence from f), 'succeeded'); end $$;
select results_eq(
    $$select state, reason, finished_at is not null from runlane.run_status((select run_id from r))$$,
    $$values ('canceled'::text, 'canceled'::text, true)$$,
    'a stopped run: canceled, finished'
);

create temp table s on commit drop as select runlane_test.queued_run('agent-t') as run_id;
create temp table fs on commit drop as select runlane_test.claimed((select run_id from s)) as fence;
do $$ begin perform runlane.finish_run((select run_id from s), (select fence from fs), 'succeeded'); end $$;
select results_eq(
    $$select state, reason, attempt, last_output_id, finished_at is not null
      from runlane.run_status((select run_id from s))$$,
    $$values ('succeeded'::text, null::text, 1, null::bigint, true)$$,
    'a succeeded run without outputs'
);
select throws_ok($$select * from runlane.run_status(-7)$$, 'RL008', 'unknown run -7', 'an unknown run is RL008');

select * from finish();
rollback;
