-- outputs_since_many pages many runs at once, each from its own cursor: visible kinds
-- only, at most p_limit per run, by position then output_id, an id named twice read twice.
begin;
select plan(7);

do $$ begin perform runlane_test.agent('agent-a'); end $$;
create temp table r on commit drop as
select
    g as n,
    runlane_test.queued_run('agent-a', 'interactive', 'interactive') as run_id
from generate_series(1, 3) as g;

-- Run n gets: placeholder, n-text-1, reasoning, n-text-2, progress, n-final.
do $$
declare
    v record;
    v_fence bigint;
begin
    for v in select n, run_id from r order by n loop
        v_fence := runlane_test.claimed(v.run_id);
        perform runlane.append_output(v.run_id, v_fence, 'placeholder', 'working');
        perform runlane.append_output(v.run_id, v_fence, 'text', v.n || '-text-1');
        perform runlane.append_output(v.run_id, v_fence, 'reasoning', 'hidden');
        perform runlane.append_output(v.run_id, v_fence, 'text', v.n || '-text-2');
        perform runlane.append_output(v.run_id, v_fence, 'progress', 'step');
        perform runlane.append_output(v.run_id, v_fence, 'final', v.n || '-final');
    end loop;
end
$$;

create function pg_temp.run(p_n int) returns bigint
language sql as $$ select run_id from r where n = p_n $$;
create function pg_temp.out_id(p_body text) returns bigint
language plpgsql as $$ begin return (select output_id from runlane.run_outputs where body = p_body); end $$;

select results_eq(
    $$select body from runlane.outputs_since_many(
        array[pg_temp.run(3), pg_temp.run(1), pg_temp.run(2)], array[0, 0, 0]::bigint[]
    )$$,
    $$values ('3-text-1'::text), ('3-text-2'), ('3-final'),
             ('1-text-1'), ('1-text-2'), ('1-final'),
             ('2-text-1'), ('2-text-2'), ('2-final')$$,
    'from the start: each run''s visible outputs, runs in the order asked'
);
select results_eq(
    $$select body from runlane.outputs_since_many(
        array[pg_temp.run(1), pg_temp.run(2), pg_temp.run(3)],
        array[pg_temp.out_id('1-text-1'), pg_temp.out_id('2-final'), 0]
    )$$,
    $$values ('1-text-2'::text), ('1-final'), ('3-text-1'), ('3-text-2'), ('3-final')$$,
    'each run from its own cursor; a run with nothing new gives no row'
);
select results_eq(
    $$select body from runlane.outputs_since_many(
        array[pg_temp.run(1), pg_temp.run(2)], array[0, pg_temp.out_id('2-text-1')]::bigint[], 1
    )$$,
    $$values ('1-text-1'::text), ('2-text-2')$$,
    'p_limit applies to each run'
);
select is(
    (
        select count(*)::int from
            runlane.outputs_since_many(
                array[pg_temp.run(1), pg_temp.run(2), pg_temp.run(3)], array[0, 0, 0]::bigint[]
            )
        where kind not in ('text', 'final', 'message_tool', 'card')
    ),
    0,
    'invisible kinds are never returned'
);
select results_eq(
    $$select body from runlane.outputs_since_many(
        array[pg_temp.run(1), pg_temp.run(1)], array[pg_temp.out_id('1-text-2'), 0]
    )$$,
    $$values ('1-final'::text), ('1-text-1'), ('1-text-2'), ('1-final')$$,
    'a run named twice is read twice, each time from its own cursor'
);
select is(
    (
        select count(*)::int from runlane.outputs_since_many(
            array[-1, pg_temp.run(2)], array[0, pg_temp.out_id('2-text-2')]
        )
    ),
    1,
    'an unknown run gives no row and no error; the other runs are read'
);
select is(
    (select count(*)::int from runlane.outputs_since_many('{}'::bigint[], '{}'::bigint[])),
    0,
    'no runs: no rows'
);

select * from finish();
rollback;
