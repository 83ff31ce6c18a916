-- finish_runs updates each run once (the first-response stamp and the charge go in the
-- closing update), yet leaves the same rows as append_output + finish_run: the stamp is
-- never reset, the timing rows equal run_timing, the computer lease is freed and held
-- messages go to their follow-up run.
begin;
select plan(11);

do $$
begin
    perform runlane_test.agent('agent-fold', 'org-fold');
    perform runlane_test.agent('agent-early', 'org-fold');
    perform runlane_test.agent('agent-pc', 'org-fold', 'computer-fold');
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
from runlane.submit_message('agent-early', 'thread-1', 'hello');
create temp table f on commit drop as
select
    s.k,
    s.run_id,
    runlane_test.claimed(s.run_id) as fence
from s;
do $$
begin
    perform runlane_test.queued_run('agent-pc', 'background', 'manual');
    insert into f (k, run_id, fence)
    values ('pc', runlane_test.last_run('agent-pc'),
            runlane_test.claimed_on_computer(runlane_test.last_run('agent-pc'), 'worker-1'));
end
$$;
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

create temp table u0 on commit drop as
select n_tup_upd from pg_stat_xact_user_tables where relid = 'runlane.runs'::regclass;
create temp table r on commit drop as
select * from runlane.finish_runs(
    array(select run_id from f order by k), array(select fence from f order by k),
    array['succeeded', 'succeeded', 'failed'], array[null, null, 'iteration_cap']::text[],
    array[0, 0.25, 1]::numeric[], array[1, 2, 0],
    array['text', 'progress', 'final'], array['again', 'working', 'reply']
);

select results_eq(
    $$select r.ok, r.sqlstate from r order by r.run_id$$,
    $$values (true, null::text), (true, null::text), (true, null::text)$$,
    'every run is finished'
);
select is(
    (select n_tup_upd from pg_stat_xact_user_tables where relid = 'runlane.runs'::regclass)
    - (select n_tup_upd from u0),
    3::bigint,
    'each finished run is updated once: stamp, charge and close in one update'
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
    $$select r.cost, r.reason from f inner join runlane.runs as r on r.run_id = f.run_id order by f.k$$,
    $$values (0::numeric, null::text), (0.25, null), (1, 'iteration_cap')$$,
    'cost charged and reason set in the closing update'
);
select is_empty(
    $$select from runlane.computer_leases where computer_id = 'computer-fold'$$,
    'the computer lease of a run on a computer is freed'
);
select is(
    (
        select count(*)::int from runlane.run_events as e
        where e.event = 'run.finished' and e.run_id in (select run_id from f)
    ),
    3,
    'run.finished is journaled once per run'
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

select * from finish();
rollback;
