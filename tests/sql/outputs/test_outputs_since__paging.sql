-- outputs_since pages through a run's visible outputs in order, across attempts.
begin;
select plan(11);

do $$ begin perform runlane_test.agent('agent-a'); end $$;
create temp table r on commit drop as
select runlane_test.queued_run('agent-a', 'interactive', 'interactive') as run_id;
create temp table f1 on commit drop as
select runlane_test.claimed((select run_id from r)) as fence;

do $$
declare
    v_run bigint := (select run_id from r);
    v_fence bigint := (select fence from f1);
begin
    perform runlane.append_output(v_run, v_fence, 'placeholder', 'working');
    perform runlane.append_output(v_run, v_fence, 'text', 'one');
    perform runlane.append_output(v_run, v_fence, 'reasoning', 'hidden');
    perform runlane.append_output(v_run, v_fence, 'text', 'two');
    perform runlane.append_output(v_run, v_fence, 'progress', 'step 2');
end
$$;
-- A later attempt keeps writing after the first one's outputs.
create temp table f2 on commit drop as
select runlane_test.claimed((select run_id from r)) as fence;
do $$
declare
    v_run bigint := (select run_id from r);
    v_fence bigint := (select fence from f2);
begin
    perform runlane.append_output(v_run, v_fence, 'message_tool', 'three');
    perform runlane.append_output(v_run, v_fence, 'metadata', '{"tokens": 5}');
    perform runlane.append_output(v_run, v_fence, 'card', 'four');
    perform runlane.append_output(v_run, v_fence, 'final', 'five');
end
$$;
-- Another run's outputs are not this run's.
create temp table other on commit drop as
select runlane_test.queued_run('agent-a', 'interactive', 'interactive') as run_id;
do $$
begin
    perform runlane.append_output(
        (select run_id from other), runlane_test.claimed((select run_id from other)), 'text', 'other run'
    );
end
$$;

select results_eq(
    $$select body from runlane.outputs_since((select run_id from r))$$,
    $$values ('one'::text), ('two'), ('three'), ('four'), ('five')$$,
    'from the start: every visible output of the run, in order, across attempts'
);
select results_eq(
    $$select attempt from runlane.outputs_since((select run_id from r))$$,
    $$values (1), (1), (2), (2), (2)$$,
    'the rows carry the attempt that wrote them'
);
select is(
    (
        select count(*)::int from runlane.outputs_since((select run_id from r))
        where kind in ('reasoning', 'placeholder', 'progress', 'metadata')
    ),
    0,
    'invisible kinds are never returned'
);
select results_eq(
    $$select body from runlane.outputs_since((select run_id from r), 0, 2)$$,
    $$values ('one'::text), ('two')$$,
    'a limit returns the first page'
);
select results_eq(
    $$select body from runlane.outputs_since(
        (select run_id from r),
        (select max(output_id) from runlane.outputs_since((select run_id from r), 0, 2)),
        2
    )$$,
    $$values ('three'::text), ('four')$$,
    'passing the last seen output id returns the next page'
);
-- (ids read first and passed as values, as a caller passes them: on Citus a call whose
-- argument reads a distributed table runs once per shard)
create temp table ids on commit drop as
select
    (select o.output_id from runlane.run_outputs as o where o.body = 'hidden') as hidden,
    (select max(o.output_id) from runlane.run_outputs as o) as last;
select results_eq(
    $$select body from runlane.outputs_since((select run_id from r), (select hidden from ids))$$,
    $$values ('two'::text), ('three'), ('four'), ('five')$$,
    'the after id may be an invisible output''s id'
);
select is(
    (
        select count(*)::int from runlane.outputs_since((select run_id from r), (select last from ids))
    ),
    0,
    'after the last output there is nothing more'
);
select throws_ok(
    format('select * from runlane.outputs_since(%s, 0, 0)', (select run_id from r)),
    '22023', null, 'a limit of 0 is refused with 22023'
);
select throws_ok(
    format('select * from runlane.outputs_since(%s, 0, 10001)', (select run_id from r)),
    '22023', null, 'a limit above 10000 is refused with 22023'
);
select lives_ok(
    format('select * from runlane.outputs_since(%s, 0, 10000)', (select run_id from r)),
    'a limit of 10000 is accepted'
);
select throws_ok(
    $$select * from runlane.outputs_since(-1)$$,
    'RL008', null, 'outputs_since on an unknown run is refused with RL008'
);

select * from finish();
rollback;
