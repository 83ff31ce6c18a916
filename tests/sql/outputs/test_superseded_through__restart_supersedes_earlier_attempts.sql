-- superseded_through: an attempt claimed without a checkpoint starts over, so the visible
-- output of every earlier attempt is superseded (up to its highest output id); before the
-- restart, and for the new attempt's own output, nothing is.
begin;
select plan(6);

do $$ begin perform runlane_test.agent('agent-s', 'org-s'); end $$;
create temp table r on commit drop as
select runlane_test.queued_run('agent-s', 'interactive', 'interactive') as run_id;
create temp table c1 on commit drop as
select c.fence from runlane.claim_runs('w1', array['interactive']) as c;

do $$ begin
    perform runlane.append_output((select run_id from r), (select fence from c1), 'text', 'par');
    perform runlane.append_output((select run_id from r), (select fence from c1), 'text', 'tial');
    perform runlane.append_output((select run_id from r), (select fence from c1), 'reasoning', 'hidden');
end $$;
create temp table first_attempt on commit drop as
select max(o.output_id) as last_visible from runlane.outputs_since((select run_id from r)) as o;

select is(
    runlane.superseded_through((select run_id from r)), 0::bigint,
    'while attempt 1 runs nothing is superseded'
);

do $$ begin perform runlane.retry_run((select run_id from r), (select fence from c1), 'boom', interval '0'); end $$;
select is(
    runlane.superseded_through((select run_id from r)), 0::bigint,
    'a failed attempt alone supersedes nothing (it may still be resumed or be the last)'
);

create temp table c2 on commit drop as
select
    c.fence,
    c.attempt,
    c.checkpoint
from runlane.claim_runs('w2', array['interactive']) as c;
select results_eq(
    $$select attempt, checkpoint is null from c2$$,
    $$values (2, true)$$,
    'attempt 2 is claimed without a checkpoint: it starts over'
);
select is(
    runlane.superseded_through((select run_id from r)),
    (select last_visible from first_attempt),
    'the restart supersedes attempt 1 up to its last visible output (not the hidden one after it)'
);

do $$ begin
    perform runlane.append_output((select run_id from r), (select fence from c2), 'text', 'whole');
    perform runlane.finish_run((select run_id from r), (select fence from c2), 'succeeded');
end $$;
select results_eq(
    $$select o.body from runlane.outputs_since((select run_id from r)) as o
      where o.output_id > runlane.superseded_through((select run_id from r)) order by o.output_id$$,
    $$values ('whole'::text)$$,
    'what is above superseded_through is the reply of the attempt that finished'
);
select is(
    (
        select e.detail ->> 'resumed' from runlane.run_events as e
        where
            e.run_id = (select run_id from r) and e.event = 'run.claimed'
            and e.detail ->> 'attempt' = '2'
    ),
    'false',
    'the claim journals resumed = false'
);

select * from finish();
rollback;
