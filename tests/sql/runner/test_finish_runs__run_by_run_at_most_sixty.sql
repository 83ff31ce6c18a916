-- finish_runs takes any number of runs that finish together, but goes run by run (one
-- subtransaction id each) at most 60 at a time: a longer call whose runs cannot all
-- finish together is refused whole with 54000 and writes nothing, so that no session's
-- snapshot overflows the 64-entry subtransaction cache.
begin;
select plan(7);

do $$
begin
    perform runlane_test.agent('agent-' || g) from generate_series(1, 61) as g;
end
$$;
-- Two threads' runs per agent: thread-1's with one run fenced out, thread-2's all owned.
create temp table f on commit drop as
select
    t.thread,
    gs.k,
    s.run_id,
    runlane_test.claimed(s.run_id) as fence
from unnest(array['thread-1', 'thread-2']) as t (thread)
cross join generate_series(1, 61) as gs (k)
cross join lateral runlane.submit_message('agent-' || gs.k, t.thread, 'hello') as s;
-- thread-1's run 7 was claimed again by another worker: f holds its old fence.
do $$
begin
    perform runlane_test.claimed(
        (select f.run_id from f where f.thread = 'thread-1' and f.k = 7)
    );
end
$$;

-- finish_runs of runs p_from .. p_to of a thread, as succeeded, without outputs.
create function pg_temp.finish(p_thread text, p_from int, p_to int)
returns table (run_id bigint, ok boolean, sqlstate text)
language sql
as $$
    select r.run_id, r.ok, r.sqlstate
    from runlane.finish_runs(
        array(select run_id from f where thread = p_thread and k between p_from and p_to order by k),
        array(select fence from f where thread = p_thread and k between p_from and p_to order by k),
        array_fill('succeeded'::text, array[p_to - p_from + 1]),
        array_fill(null::text, array[p_to - p_from + 1]),
        array_fill(0::numeric, array[p_to - p_from + 1]),
        array_fill(0, array[p_to - p_from + 1]),
        '{}'::text[], '{}'::text[]
    ) as r
$$;

-- How many of a thread's runs are in p_state.
create function pg_temp.runs_in(p_thread text, p_state text) returns bigint
language plpgsql
as $$
begin
    return (
        select count(*) from runlane.runs
        where run_id in (select run_id from f where thread = p_thread) and state = p_state
    );
end;
$$;

select throws_ok(
    $$select * from pg_temp.finish('thread-1', 1, 61)$$,
    '54000',
    'finish_runs finishes at most 60 runs one by one, got 61',
    '61 runs with one fenced out: refused whole, 54000'
);
select is(
    pg_temp.runs_in('thread-1', 'running'),
    61::bigint,
    'the refused call finished none of its runs'
);
select is(
    (
        select count(*) from runlane.run_events
        where run_id in (select run_id from f where thread = 'thread-1') and event = 'run.finished'
    ),
    0::bigint,
    'and journaled none'
);

-- The same runs in parts of at most 60: run by run where one cannot finish together.
create temp table r on commit drop as
select * from pg_temp.finish('thread-1', 1, 60)
union all
select * from pg_temp.finish('thread-1', 61, 61);

select is(
    (select count(*) from r where ok),
    60::bigint,
    'in parts: every run but the fenced-out one finished'
);
select is(
    (select r.sqlstate from r inner join f on r.run_id = f.run_id where f.k = 7 and f.thread = 'thread-1'),
    'RL001',
    'and the fenced-out run is refused alone (RL001)'
);

-- 61 runs that all finish together: one call, however many.
select is(
    (select count(*) filter (where ok) from pg_temp.finish('thread-2', 1, 61)),
    61::bigint,
    '61 runs that all finish together are finished by one call'
);
select is(
    pg_temp.runs_in('thread-2', 'succeeded'),
    61::bigint,
    'and every one of them is succeeded'
);

select * from finish();
rollback;
