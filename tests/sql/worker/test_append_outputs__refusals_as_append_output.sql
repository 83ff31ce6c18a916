-- Each run refused by append_outputs gets the SQLSTATE, column and message append_output
-- raises for its first offending element: a stopped run (cancel_run), a run that lost
-- its computer, an unknown run, a null kind, a body over 1 MB, an unknown kind (after an
-- element that is fine, none of them written). A null run id is RL008. A computer-bound
-- run that holds its computer is applied, in the same batch.
begin;
select plan(11);

create function pg_temp.error_of(p_sql text)
returns text[]
language plpgsql
as $$
declare
    v_state text;
    v_column text;
    v_message text;
begin
    execute p_sql;
    return null;
exception when others then
    get stacked diagnostics v_state = returned_sqlstate, v_column = column_name, v_message = message_text;
    return array[v_state, nullif(v_column, ''), v_message];
end;
$$;

do $$
declare
    v_away bigint;
begin
    perform runlane_test.agent('agent-stop', 'org-x');
    perform runlane_test.claimed(runlane_test.queued_run('agent-stop', 'interactive', 'interactive'));
    perform runlane.cancel_run(runlane_test.last_run('agent-stop'));
    -- a computer-bound run whose computer another run took over
    perform runlane_test.agent('agent-away', 'org-x', 'computer-x');
    perform runlane_test.agent('agent-took', 'org-x', 'computer-x');
    v_away := runlane_test.queued_run('agent-away', 'background', 'manual');
    perform runlane_test.claimed_on_computer(v_away);
    perform runlane_test.claimed_on_computer(runlane_test.queued_run('agent-took', 'background', 'manual'));
    -- a computer-bound run that holds its computer
    perform runlane_test.agent('agent-held', 'org-x', 'computer-y');
    perform runlane_test.claimed_on_computer(runlane_test.queued_run('agent-held', 'background', 'manual'));
    perform runlane_test.agent('agent-fine', 'org-x');
    perform runlane_test.claimed(runlane_test.queued_run('agent-fine', 'interactive', 'interactive'));
end
$$;

create temp table k on commit drop as
select
    runlane_test.last_run('agent-stop') as stop,
    runlane_test.last_run('agent-away') as away,
    runlane_test.last_run('agent-held') as held,
    runlane_test.last_run('agent-fine') as fine;

create temp table res on commit drop as
select
    o.*,
    row_number() over () as position
from runlane.append_outputs(
    array[
        (select stop from k), (select away from k), -1, null, (select held from k), (select fine from k),
        (select fine from k)
    ]::bigint[],
    array[1, 1, 1, 1, 1, 1, 1]::bigint[],
    array[1, 1, 1, 1, 1, 1, 2]::bigint[],
    array['text', 'text', 'text', 'text', 'text', 'progress', 'poem'],
    array['a', 'b', 'c', 'd', 'e', 'f', 'g']
) as o;

create function pg_temp.row_of(p_run_id bigint)
returns text[]
language sql
as $$
    select array[r.sqlstate, r.column_name, r.message] from res as r where r.run_id = p_run_id;
$$;

select results_eq(
    $$select run_id, outcome from res order by position$$,
    $$values ((select stop from k), 'refused'::text), ((select away from k), 'refused'), (-1::bigint, 'refused'),
             (null::bigint, 'refused'), ((select held from k), 'applied'), ((select fine from k), 'refused')$$,
    'one row per run, in order of first appearance; only the run holding its computer is applied'
);
select is(
    pg_temp.row_of((select stop from k)),
    pg_temp.error_of(format('select runlane.append_output(%s, 1, ''text'', ''a'', 1)', (select stop from k))),
    'a stopped run is refused as append_output refuses it (RL001)'
);
select is(
    pg_temp.row_of((select away from k)),
    pg_temp.error_of(format('select runlane.append_output(%s, 1, ''text'', ''b'', 1)', (select away from k))),
    'a run that lost its computer is refused as append_output refuses it (RL001)'
);
select is(
    pg_temp.row_of(-1),
    pg_temp.error_of('select runlane.append_output(-1, 1, ''text'', ''c'', 1)'),
    'an unknown run is refused as append_output refuses it (RL008)'
);
select is(
    (select r.sqlstate from res as r where r.run_id is null),
    'RL008',
    'a null run id is refused RL008'
);
select is(
    pg_temp.row_of((select fine from k)),
    pg_temp.error_of(format('select runlane.append_output(%s, 1, ''poem'', ''g'', 2)', (select fine from k))),
    'an unknown kind is refused as append_output refuses it (22023), its run whole'
);
select results_eq(
    $$select o.run_id, o.body from runlane.run_outputs as o
      where o.run_id in ((select stop from k), (select away from k), (select held from k), (select fine from k))$$,
    $$values ((select held from k), 'e'::text)$$,
    'only the applied run''s output is written'
);

-- arguments, one run each
select is(
    (
        select array[o.sqlstate, o.column_name, o.message]
        from runlane.append_outputs(
            array[(select fine from k)], array[1]::bigint[], array[1]::bigint[], array[null::text], array['x']
        ) as o
    ),
    pg_temp.error_of(format('select runlane.append_output(%s, 1, null, ''x'', 1)', (select fine from k))),
    'a null kind is refused as append_output refuses it (22004)'
);
select is(
    (
        select array[o.sqlstate, o.column_name, o.message]
        from runlane.append_outputs(
            array[(select fine from k)], array[1]::bigint[], array[1]::bigint[], array['text'],
            array[repeat('x', 1048577)]
        ) as o
    ),
    pg_temp.error_of(format(
        'select runlane.append_output(%s, 1, ''text'', repeat(''x'', 1048577), 1)', (select fine from k)
    )),
    'a body over 1 MB is refused as append_output refuses it (22023)'
);
select is(
    (
        select o.outcome
        from runlane.append_outputs(
            array[(select fine from k)], array[1]::bigint[], array[1]::bigint[], array['text'],
            array[repeat('x', 1048576)]
        ) as o
    ),
    'applied',
    'a body of exactly 1 MB is applied'
);
select is(
    (
        select array[o.sqlstate, o.message]
        from runlane.append_outputs(
            array[(select away from k)], array[1]::bigint[], array[1]::bigint[], array['kind?'], array['x']
        ) as o
    ),
    array['22023', 'unknown output kind ''kind?'''],
    'an argument error comes before the run''s state, as in append_output'
);

select * from finish();
rollback;
