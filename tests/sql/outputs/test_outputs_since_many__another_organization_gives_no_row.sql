-- For a login scoped to one organization, outputs_since_many gives no row for another
-- organization's run, exactly as for an unknown id, and its own runs' rows.
begin;
select plan(4);

do $$ begin perform runlane_test.agent('agent-a', 'org-a'); perform runlane_test.agent('agent-b', 'org-b'); end $$;
create temp table r on commit drop as
select
    a.agent_id,
    runlane_test.queued_run(a.agent_id, 'interactive', 'interactive') as run_id
from (values ('agent-a'), ('agent-b')) as a (agent_id);
do $$
declare
    v record;
begin
    for v in select agent_id, run_id from r order by agent_id loop
        perform runlane.append_output(v.run_id, runlane_test.claimed(v.run_id), 'text', v.agent_id || ' says');
    end loop;
end
$$;
grant select on r to public;

create role rl_test_scoped_a login;
grant runlane_api to rl_test_scoped_a;
select runlane.scope_api_login('rl_test_scoped_a', 'org-a');

set local session authorization rl_test_scoped_a;

select is(
    (
        select count(*)::int
        from runlane.outputs_since_many(array[(select run_id from r where agent_id = 'agent-b')], array[0]::bigint[])
    ),
    0,
    'another organization''s run: no row, no error'
);
select is(
    (select count(*)::int from runlane.outputs_since_many(array[-1]::bigint[], array[0]::bigint[])),
    0,
    'an unknown run: no row, no error'
);
select results_eq(
    $$select body from runlane.outputs_since_many(
        array[(select run_id from r where agent_id = 'agent-b'), (select run_id from r where agent_id = 'agent-a')],
        array[0, 0]::bigint[]
    )$$,
    $$values ('agent-a says'::text)$$,
    'in one call with a foreign run, its own run''s rows'
);

reset session authorization;
select results_eq(
    $$select body from runlane.outputs_since_many(
        array[(select run_id from r where agent_id = 'agent-b'), (select run_id from r where agent_id = 'agent-a')],
        array[0, 0]::bigint[]
    )$$,
    $$values ('agent-b says'::text), ('agent-a says')$$,
    'an unscoped login reads every organization''s runs'
);

select * from finish();
rollback;
