-- finish_runs writes each run's outputs and finishes it as append_output + finish_run
-- would, each run in its own subtransaction: a fenced-out or refused run is reported with
-- its SQLSTATE and rolled back alone, its neighbours' finishes stand.
begin;
select plan(14);

do $$
begin
    perform runlane_test.agent('agent-a');
    perform runlane_test.agent('agent-b');
    perform runlane_test.agent('agent-c');
    perform runlane_test.agent('agent-d');
end
$$;
create temp table s on commit drop as
select
    'a' as k,
    *
from runlane.submit_message('agent-a', 'thread-1', 'hello a')
union all
select
    'b' as k,
    *
from runlane.submit_message('agent-b', 'thread-1', 'hello b')
union all
select
    'c' as k,
    *
from runlane.submit_message('agent-c', 'thread-1', 'hello c')
union all
select
    'd' as k,
    *
from runlane.submit_message('agent-d', 'thread-1', 'hello d');
create temp table f on commit drop as
select
    s.k,
    s.run_id,
    runlane_test.claimed(s.run_id) as fence
from s;
-- b was claimed again by another worker: f holds its old fence.
do $$ begin perform runlane_test.claimed((select run_id from f where k = 'b')); end $$;

-- a: two outputs (a hidden one, then visible text); b: fenced out; c: no outputs, a cost;
-- d: an outcome finish_run refuses.
create temp table r on commit drop as
select * from runlane.finish_runs(
    array(select run_id from f order by k), array(select fence from f order by k),
    array['succeeded', 'succeeded', 'succeeded', 'done'], array[null, null, null, null]::text[],
    array[0, 0, 0.5, 0]::numeric[], array[2, 1, 0, 0],
    array['progress', 'text', 'text'], array['working', 'reply a', 'reply b']
);

select results_eq(
    $$select r.run_id, r.ok, r.sqlstate from r$$,
    $$select f.run_id, f.k in ('a', 'c'), case f.k when 'b' then 'RL001' when 'd' then '22023' end
      from f order by f.k$$,
    'one row per run in input order: b fenced out (RL001), d refused (22023), a and c finished'
);
select results_eq(
    $$select r.run_id, state from runlane.runs as r where r.run_id in (select run_id from f) order by r.run_id$$,
    $$select f.run_id, case when f.k in ('a', 'c') then 'succeeded' else 'running' end
      from f order by f.run_id$$,
    'the refused runs stay running, their neighbours are finished'
);
select results_eq(
    $$select o.kind, o.body from runlane.run_outputs as o
      where o.run_id = (select run_id from f where k = 'a') order by o.output_id$$,
    $$values ('progress'::text, 'working'::text), ('text', 'reply a')$$,
    'a run''s outputs are written in the order given'
);
select is_empty(
    $$select from runlane.run_outputs as o where o.run_id in (select run_id from f where k in ('b', 'd'))$$,
    'a refused run''s outputs are rolled back with it'
);
select is(
    (select r.first_response ->> 'event' from r where r.run_id = (select run_id from f where k = 'a')),
    'run.first_response',
    'the first visible output returns the run.first_response timing row'
);
select ok(
    (
        select fr.first_response_at is not null and fr.first_response_at <= fr.finished_at
        from runlane.runs as fr where fr.run_id = (select run_id from f where k = 'a')
    ),
    'first_response is stamped in the same transaction, before the finish'
);
select is(
    (select r.timing ->> 'event' from r where r.run_id = (select run_id from f where k = 'a')),
    'run.finished',
    'a finished run returns its run.finished timing row'
);
select ok(
    (
        select r.first_response is null and r.timing is null from r
        where r.run_id = (select run_id from f where k = 'b')
    ),
    'a fenced-out run reports no timing rows'
);
select ok(
    (
        select r.first_response is null and r.timing is not null from r
        where r.run_id = (select run_id from f where k = 'c')
    ),
    'a run without outputs has no first response but is finished'
);
select is(
    (select cost from runlane.runs where run_id = (select run_id from f where k = 'c')),
    0.5::numeric,
    'the cost is charged as finish_run charges it'
);
select is(
    (
        select count(*)::int from runlane.run_events as e
        where e.event = 'run.finished' and e.run_id in (select run_id from f)
    ),
    2,
    'run.finished is journaled for the finished runs only'
);

select throws_ok(
    $$select * from runlane.finish_runs(array[1]::bigint[], array[1]::bigint[], array['succeeded'],
        array[null]::text[], array[0]::numeric[], array[1], '{}'::text[], '{}'::text[])$$,
    '22023', null, 'output counts that do not add up to the outputs given are refused with 22023'
);
select throws_ok(
    $$select * from runlane.finish_runs(array[1, 2]::bigint[], array[1]::bigint[], array['succeeded'],
        array[null]::text[], array[0]::numeric[], array[0], '{}'::text[], '{}'::text[])$$,
    '22023', null, 'run arrays of different lengths are refused with 22023'
);
select throws_ok(
    $$select * from runlane.finish_runs(array[1]::bigint[], array[1]::bigint[], array['succeeded'],
        array[null]::text[], array[0]::numeric[], array[0], null, '{}'::text[])$$,
    '22004', null, 'a null array is refused with 22004'
);

select * from finish();
rollback;
