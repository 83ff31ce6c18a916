-- append_outputs applies each run of a batch alone: one run fenced out (a newer claim
-- took it) is refused RL001 with nothing of it written, while the other two runs' outputs
-- are written with their attempt, in number order, and their last numbers recorded.
begin;
select plan(8);

do $$
begin
    perform runlane_test.agent('agent-b1', 'org-b');
    perform runlane_test.agent('agent-b2', 'org-b');
    perform runlane_test.agent('agent-b3', 'org-b');
    perform runlane_test.claimed(runlane_test.queued_run('agent-b1', 'interactive', 'interactive'));
    perform runlane_test.claimed(runlane_test.queued_run('agent-b2', 'interactive', 'interactive'));
    perform runlane_test.claimed(runlane_test.queued_run('agent-b3', 'interactive', 'interactive'));
end
$$;

create temp table k on commit drop as
select
    runlane_test.last_run('agent-b1') as r1,
    runlane_test.last_run('agent-b2') as r2,
    runlane_test.last_run('agent-b3') as r3;
-- run 2 is claimed again: its caller holds fence 1, the run fence 2
do $$ begin perform runlane_test.claimed((select r2 from k)); end $$;

create temp table res on commit drop as
select
    o.*,
    row_number() over () as position
from runlane.append_outputs(
    array[(select r1 from k), (select r2 from k), (select r3 from k), (select r1 from k), (select r3 from k)],
    array[1, 1, 1, 1, 1]::bigint[],
    array[1, 1, 1, 2, 2]::bigint[],
    array['reasoning', 'text', 'progress', 'text', 'text'],
    array['r1 thinks', 'r2 says', 'r3 works', 'r1 says', 'r3 says']
) as o;

select results_eq(
    $$select run_id, outcome, sqlstate from res order by position$$,
    $$values ((select r1 from k), 'applied'::text, null::text),
             ((select r2 from k), 'refused', 'RL001'),
             ((select r3 from k), 'applied', null)$$,
    'one row per run in order of first appearance: the fenced-out run is refused alone'
);
select alike(
    (select message from res where run_id = (select r2 from k)),
    'lease lost: run % is running with fence 2, the caller holds fence 1',
    'its message is append_output''s'
);
select is(
    (select count(*)::int from runlane.run_outputs where run_id = (select r2 from k)),
    0,
    'nothing of the fenced-out run is written'
);
select results_eq(
    $$select o.run_id, o.attempt, o.kind, o.body from runlane.run_outputs as o
      where o.run_id in ((select r1 from k), (select r3 from k)) order by o.output_id$$,
    $$values ((select r1 from k), 1, 'reasoning'::text, 'r1 thinks'::text),
             ((select r1 from k), 1, 'text', 'r1 says'),
             ((select r3 from k), 1, 'progress', 'r3 works'),
             ((select r3 from k), 1, 'text', 'r3 says')$$,
    'the other runs'' outputs are written with their attempt, ids in number order per run'
);
select results_eq(
    $$select r.run_id, r.write_fence, r.write_seq from runlane.runs as r
      where r.agent_id like 'agent-b_' order by r.run_id$$,
    $$values ((select r1 from k), 1::bigint, 2::bigint),
             ((select r2 from k), null, null),
             ((select r3 from k), 1, 2)$$,
    'each applied run records its last number; the refused one records nothing'
);
select is(
    (select count(*)::int from res where first_response ->> 'event' = 'run.first_response'),
    2,
    'both applied runs carry their run.first_response row'
);

-- the same with append_output for the fenced-out run: the same error
select throws_ok(
    format('select runlane.append_output(%s, 1, ''text'', ''r2 says'', 1)', (select r2 from k)),
    'RL001',
    (select message from res where run_id = (select r2 from k)),
    'append_output raises the same SQLSTATE and message'
);

-- a run refused for a bad kind: only that run
select results_eq(
    format(
        $$select o.run_id, o.outcome, o.sqlstate from runlane.append_outputs(
            array[%1$s, %2$s]::bigint[], array[1, 1]::bigint[], array[3, 3]::bigint[],
            array['text', 'poem'], array['fine', 'odd']) as o$$,
        (select r1 from k), (select r3 from k)
    ),
    format(
        $$values (%s::bigint, 'applied'::text, null::text), (%s, 'refused', '22023')$$,
        (select r1 from k), (select r3 from k)
    ),
    'an unknown kind refuses its run only'
);

select * from finish();
rollback;
