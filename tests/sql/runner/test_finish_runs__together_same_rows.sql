-- finish_runs finishes a batch of the common case (every run running under its fence, off
-- computers, not asked to stop, its write not applied yet) together, in a few statements
-- for the whole batch, and leaves the rows the run-by-run path leaves: outputs in order,
-- the first-response stamp set once, charges, one closing update per run, the write
-- sequence number, the journal, held messages given to a follow-up run, timing rows equal
-- to run_timing. A batch with one run the common case does not cover goes run by run.
begin;
select plan(19);

set local track_functions = 'pl';

do $$
begin
    perform runlane_test.agent('agent-fold', 'org-fold');
    perform runlane_test.agent('agent-early', 'org-fold');
    perform runlane_test.agent('agent-quiet', 'org-fold');
end
$$;
create temp table s on commit drop as
select
    'fold' as k,
    *
from runlane.submit_message('agent-fold', 'thread-1', 'hello')
union all
select
    'early' as k,
    *
from runlane.submit_message('agent-early', 'thread-1', 'hello')
union all
select
    'quiet' as k,
    *
from runlane.submit_message('agent-quiet', 'thread-1', 'hello');
create temp table f on commit drop as
select
    s.k,
    s.run_id,
    runlane_test.claimed(s.run_id) as fence
from s;
-- early: its first response was streamed before the finish.
do $$
begin
    perform runlane.append_output(
        (select run_id from f where k = 'early'), (select fence from f where k = 'early'), 'text', 'streamed'
    );
end
$$;
create temp table early_stamp on commit drop as
select first_response_at from runlane.runs where run_id = (select run_id from f where k = 'early');
-- fold: a message arrives for its thread while it runs, so it is held.
do $$ begin perform runlane.submit_message('agent-fold', 'thread-1', 'one more thing'); end $$;

-- quiet: its thread has no row to lock (as if purged): the finish gives it one.
delete from runlane.threads where agent_id = 'agent-quiet';

create temp table u0 on commit drop as
select n_tup_upd from pg_stat_xact_user_tables where relid = 'runlane.runs'::regclass;
create temp table c0 on commit drop as
select coalesce(sum(x.calls), 0)::int as calls from pg_stat_xact_user_functions as x
where x.schemaname = 'runlane' and x.funcname in ('_require_owner', '_close_run_with');
create temp table r on commit drop as
select * from runlane.finish_runs(
    array(select run_id from f order by k), array(select fence from f order by k),
    array['succeeded', 'succeeded', 'failed'], array[null, null, 'iteration_cap']::text[],
    array[0, 0.25, 1]::numeric[], array[1, 2, 0],
    array['text', 'progress', 'final'], array['again', 'working', 'reply'],
    array[1, null, 1]::bigint[]
);

select results_eq(
    $$select r.ok, r.sqlstate from r order by r.run_id$$,
    $$values (true, null::text), (true, null::text), (true, null::text)$$,
    'every run is finished'
);
select is(
    (
        select coalesce(sum(x.calls), 0)::int from pg_stat_xact_user_functions as x
        where x.schemaname = 'runlane' and x.funcname in ('_require_owner', '_close_run_with')
    ) - (select calls from c0),
    0,
    'the batch was finished together: no run went through the run-by-run path'
);
select isnt_empty(
    $$select from runlane.threads where agent_id = 'agent-quiet' and thread_id = 'thread-1'$$,
    'a thread without a row to lock gets one'
);
select is(
    (select n_tup_upd from pg_stat_xact_user_tables where relid = 'runlane.runs'::regclass)
    - (select n_tup_upd from u0),
    3::bigint,
    'each finished run is updated once: stamp, charge, write number and close in one update'
);
select is(
    (select first_response_at from runlane.runs where run_id = (select run_id from f where k = 'early')),
    (select first_response_at from early_stamp),
    'a first response already stamped is never reset by a later visible output'
);
select ok(
    (select r.first_response is null from r where r.run_id = (select run_id from f where k = 'early')),
    'no first-response timing row when the stamp was made before'
);
select ok(
    (
        select fr.first_response_at is not null and fr.first_response_at <= fr.finished_at
        from runlane.runs as fr where fr.run_id = (select run_id from f where k = 'fold')
    ),
    'the first visible output of the finish call stamps first_response_at, before finished_at'
);
select ok(
    (select fr.first_response_at is null from runlane.runs as fr where fr.run_id = (select run_id from f where k = 'quiet')),
    'a run finished without outputs has no first response'
);
select results_eq(
    $$select r.timing from r order by r.run_id$$,
    $$select runlane.run_timing(f.run_id) || '{"event": "run.finished"}'::jsonb from f order by f.run_id$$,
    'each run.finished timing row is what run_timing reads back, plus the event'
);
select is(
    (select r.first_response from r where r.run_id = (select run_id from f where k = 'fold')),
    runlane.run_timing((select run_id from f where k = 'fold'))
    - 'run.outcome' - 'run.total_ms' - 'run.execution_wall_ms'
    || '{"event": "run.first_response"}'::jsonb,
    'the first-response timing row is the run''s timing while it was still running'
);
select results_eq(
    $$select r.state, r.cost, r.reason, r.last_error, r.write_fence = r.fence, r.write_seq
      from f inner join runlane.runs as r on r.run_id = f.run_id order by f.k$$,
    $$values ('succeeded', 0::numeric, null::text, null::text, true, 1::bigint),
             ('succeeded', 0.25, null, null, null, null),
             ('failed', 1, 'iteration_cap', 'iteration_cap', true, 1)$$,
    'outcome, cost, reason, error and the write number set in the closing update'
);
select results_eq(
    $$select c.run_id, c.amount from runlane.charges as c where c.run_id in (select run_id from f) order by c.run_id$$,
    $$select f.run_id, 0.25::numeric from f where f.k = 'fold'
      union all select f.run_id, 1::numeric from f where f.k = 'quiet' order by 1$$,
    'a positive cost is charged once, a cost of 0 writes no ledger row'
);
select results_eq(
    $$select o.run_id, o.kind, o.body, o.attempt from runlane.run_outputs as o
      where o.run_id in (select run_id from f) order by o.output_id$$,
    $$select (select run_id from f where k = 'early'), 'text', 'streamed', 1
      union all select (select run_id from f where k = 'early'), 'text', 'again', 1
      union all select (select run_id from f where k = 'fold'), 'progress', 'working', 1
      union all select (select run_id from f where k = 'fold'), 'final', 'reply', 1$$,
    'outputs are written in order with the run''s attempt'
);
select results_eq(
    $$select e.run_id, e.detail from runlane.run_events as e
      where e.event = 'run.finished' and e.run_id in (select run_id from f) order by e.run_id$$,
    $$select f.run_id, case f.k when 'quiet' then '{"outcome": "failed", "reason": "iteration_cap"}'::jsonb
                                else '{"outcome": "succeeded", "reason": null}'::jsonb end
      from f order by f.run_id$$,
    'run.finished is journaled once per run with its outcome and reason'
);
select is(
    (
        select m.run_id from runlane.messages as m
        where m.agent_id = 'agent-fold' and m.body = 'one more thing'
    ),
    (
        select nr.run_id from runlane.runs as nr
        where nr.agent_id = 'agent-fold' and nr.state = 'queued' and nr.lane = 'interactive'
    ),
    'the held message is given to a queued follow-up run'
);

-- A batch with a run fenced out goes run by run: the others finish, it alone is refused.
create temp table g on commit drop as
select
    x.k,
    x.run_id,
    runlane_test.claimed(x.run_id) as fence
from (
    select
        'g1' as k,
        run_id
    from runlane.submit_message('agent-early', 'thread-2', 'hi')
    union all
    select
        'g2' as k,
        run_id
    from runlane.submit_message('agent-quiet', 'thread-2', 'hi')
) as x;
create temp table r2 on commit drop as
select * from runlane.finish_runs(
    array(select run_id from g order by k), array(select fence + (k = 'g2')::int from g order by k),
    array['succeeded', 'succeeded'], array[null, null]::text[],
    array[0, 0]::numeric[], array[0, 0], '{}'::text[], '{}'::text[],
    array[1, 1]::bigint[]
);
select results_eq(
    $$select g.k, r2.ok, r2.sqlstate from r2 join g using (run_id) order by g.k$$,
    $$values ('g1', true, null::text), ('g2', false, 'RL001')$$,
    'with a run fenced out, the others finish and that one is refused with RL001'
);
select results_eq(
    $$select g.k, r.state from g join runlane.runs as r using (run_id) order by g.k$$,
    $$values ('g1', 'succeeded'), ('g2', 'running')$$,
    'the refused run is left as it was'
);

-- An otherwise clean batch with an output of an unknown kind, or of no kind: the table
-- refuses the together path's insert, and run by run that run alone is refused.
create temp table h on commit drop as
select
    x.k,
    x.run_id,
    runlane_test.claimed(x.run_id) as fence
from (
    select
        'h1' as k,
        run_id
    from runlane.submit_message('agent-early', 'thread-3', 'hi')
    union all
    select
        'h2' as k,
        run_id
    from runlane.submit_message('agent-quiet', 'thread-3', 'hi')
    union all
    select
        'h3' as k,
        run_id
    from runlane.submit_message('agent-fold', 'thread-3', 'hi')
) as x;
create temp table r3 on commit drop as
select * from runlane.finish_runs(
    array(select run_id from h order by k), array(select fence from h order by k),
    array['succeeded', 'succeeded', 'succeeded'], array[null, null, null]::text[],
    array[0, 0, 0]::numeric[], array[1, 1, 1], array['text', 'shout', null],
    array['fine', 'LOUD', 'no kind'], array[1, 1, 1]::bigint[]
);
select results_eq(
    $$select h.k, r3.ok, r3.sqlstate from r3 join h using (run_id) order by h.k$$,
    $$values ('h1', true, null::text), ('h2', false, '22023'), ('h3', false, '22004')$$,
    'an unknown kind is refused with 22023 and a missing one with 22004, that run alone'
);
select results_eq(
    $$select o.kind, o.body from runlane.run_outputs as o where o.run_id in (select run_id from h)$$,
    $$values ('text', 'fine')$$,
    'only the good run''s output is written'
);

select * from finish();
rollback;
