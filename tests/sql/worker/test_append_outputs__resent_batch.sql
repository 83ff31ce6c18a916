-- A batch whose reply was lost is sent again, whole: the second call writes nothing and
-- answers every run 'resent'; the run whose first visible output the batch carried gets
-- its run.first_response row again, the others null. A resend is answered even once the
-- run has finished. A refused run of the first call is refused again.
begin;
select plan(11);

do $$
begin
    perform runlane_test.agent('agent-l1', 'org-l');
    perform runlane_test.agent('agent-l2', 'org-l');
    perform runlane_test.agent('agent-l3', 'org-l');
    perform runlane_test.claimed(runlane_test.queued_run('agent-l1', 'interactive', 'interactive'));
    perform runlane_test.claimed(runlane_test.queued_run('agent-l2', 'interactive', 'interactive'));
    perform runlane_test.claimed(runlane_test.queued_run('agent-l3', 'interactive', 'interactive'));
end
$$;
create temp table k on commit drop as
select
    runlane_test.last_run('agent-l1') as r1,
    runlane_test.last_run('agent-l2') as r2,
    runlane_test.last_run('agent-l3') as r3;

create function pg_temp.batch()
returns table (run_id bigint, outcome text, first_response jsonb, sqlstate text)
language sql
as $$
    select o.run_id, o.outcome, o.first_response, o.sqlstate
    from runlane.append_outputs(
        array[(select r1 from k), (select r2 from k), (select r1 from k), (select r3 from k)],
        array[1, 1, 1, 1]::bigint[],
        array[1, 1, 2, 1]::bigint[],
        array['reasoning', 'progress', 'text', 'card'],
        array['thinking', 'working', 'Hello', 'ok']
    ) as o;
$$;
-- run 3 was asked to stop: refused in both calls
do $$ begin perform runlane.cancel_run((select r3 from k)); end $$;

create temp table first_call on commit drop as
select
    b.*,
    row_number() over () as position
from pg_temp.batch() as b;
create temp table counts on commit drop as
select
    o.run_id,
    count(*) as n
from runlane.run_outputs as o group by o.run_id;

select results_eq(
    $$select run_id, outcome, first_response ->> 'event', sqlstate from first_call order by position$$,
    $$values ((select r1 from k), 'applied'::text, 'run.first_response'::text, null::text),
             ((select r2 from k), 'applied', null, null),
             ((select r3 from k), 'refused', null, 'RL001')$$,
    'the first call applies runs 1 and 2 (run 1 stamps its first response) and refuses the stopped run'
);

create temp table second_call on commit drop as
select
    b.*,
    row_number() over () as position
from pg_temp.batch() as b;
select results_eq(
    $$select run_id, outcome, sqlstate from second_call order by position$$,
    $$values ((select r1 from k), 'resent'::text, null::text),
             ((select r2 from k), 'resent', null),
             ((select r3 from k), 'refused', 'RL001')$$,
    'the same call again answers resent, and the stopped run is refused again'
);
select is(
    (select first_response from second_call where run_id = (select r1 from k)),
    (select first_response from first_call where run_id = (select r1 from k)),
    'the resend returns run 1''s run.first_response row again'
);
select is(
    (select first_response from second_call where run_id = (select r2 from k)),
    null,
    'a run whose elements are all hidden gets none'
);
select set_eq(
    $$select o.run_id, count(*) from runlane.run_outputs as o group by o.run_id$$,
    $$select run_id, n from counts$$,
    'the resend wrote nothing'
);

-- run 1 finishes; the batch is sent once more
do $$ begin perform runlane.finish_run((select r1 from k), 1, 'succeeded', null, 0, 3); end $$;
select results_eq(
    $$select b.run_id, b.outcome from pg_temp.batch() as b where b.run_id = (select r1 from k)$$,
    $$values ((select r1 from k), 'resent'::text)$$,
    'a resend is answered even once the run has finished'
);
select is(
    (select count(*)::int from runlane.run_outputs where run_id = (select r1 from k)),
    2,
    'and writes nothing'
);
select is(
    (select count(*)::int from runlane.run_outputs where run_id = (select r3 from k)),
    0,
    'the stopped run got nothing'
);

-- a batch resent with a new element added: the applied ones are skipped, the new applied
select results_eq(
    format(
        $$select o.outcome, o.first_response ->> 'event' from runlane.append_outputs(
            array[%1$s, %1$s]::bigint[], array[1, 1]::bigint[], array[1, 2]::bigint[],
            array['progress', 'text'], array['working', 'more']) as o$$,
        (select r2 from k)
    ),
    $$values ('applied'::text, 'run.first_response'::text)$$,
    'a partly applied run is applied (its new visible output stamps the first response)'
);
select results_eq(
    format(
        $$select o.outcome, o.first_response from runlane.append_outputs(
            array[%1$s, %1$s]::bigint[], array[1, 1]::bigint[], array[2, 3]::bigint[],
            array['text', 'progress'], array['more', 'still working']) as o$$,
        (select r2 from k)
    ),
    format(
        $$select 'applied'::text, runlane._timing_row(%s, 'run.first_response')$$, (select r2 from k)
    ),
    'a partly applied run whose applied element is visible gets the run.first_response row again'
);
select results_eq(
    format('select body from runlane.run_outputs where run_id = %s order by output_id', (select r2 from k)),
    $$values ('working'::text), ('more'), ('still working')$$,
    'each number is written once'
);

select * from finish();
rollback;
