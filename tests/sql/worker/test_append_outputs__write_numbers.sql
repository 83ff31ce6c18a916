-- append_outputs numbers a run's outputs as append_output does: a number that skips ahead
-- is refused with 22023 (COLUMN write_seq) and append_output's message; a run's elements
-- that are not consecutive in array order, or do not share one fence, are refused the
-- same way; elements already applied are skipped and the rest applied; nothing of a
-- refused run is written.
begin;
select plan(14);

-- (sqlstate, column, message) of a statement's error, null when it succeeds
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

create function pg_temp.refusal(p_run_ids bigint[], p_fences bigint[], p_seqs bigint[])
returns text[]
language sql
as $$
    select array[o.outcome, o.sqlstate, o.column_name, o.message]
    from runlane.append_outputs(
        p_run_ids, p_fences, p_seqs,
        array(select 'progress' from unnest(p_run_ids)),
        array(select 'step' from unnest(p_run_ids))
    ) as o;
$$;

do $$
begin
    perform runlane_test.agent('agent-n', 'org-n');
    perform runlane_test.claimed(runlane_test.queued_run('agent-n', 'interactive', 'interactive'));
end
$$;
create temp table k on commit drop as
select
    r.run_id,
    r.fence
from runlane.runs as r where r.agent_id = 'agent-n';

select is(
    pg_temp.refusal(array[(select run_id from k)] || (select run_id from k), array[1, 1]::bigint[], array[1, 2]::bigint[]),
    array['applied', null, null, null],
    'writes 1 and 2 are applied'
);
select is(
    pg_temp.refusal(array[(select run_id from k)], array[1]::bigint[], array[5]::bigint[]),
    array['refused'] || pg_temp.error_of(
        format('select runlane.append_output(%s, 1, ''progress'', ''step'', 5)', (select run_id from k))
    ),
    'a number that skips ahead is refused as append_output refuses it (22023, write_seq, its message)'
);
select is(
    (pg_temp.refusal(array[(select run_id from k)] || (select run_id from k), array[1, 1]::bigint[], array[3, 5]::bigint[]))[1:3],
    array['refused', '22023', 'write_seq'],
    'numbers not consecutive within the run are refused (22023, write_seq)'
);
select is(
    (pg_temp.refusal(array[(select run_id from k)] || (select run_id from k), array[1, 1]::bigint[], array[4, 3]::bigint[]))[1:3],
    array['refused', '22023', 'write_seq'],
    'so are numbers out of array order'
);
select is(
    (pg_temp.refusal(array[(select run_id from k)] || (select run_id from k), array[1, 2]::bigint[], array[3, 4]::bigint[]))[1:3],
    array['refused', '22023', 'write_seq'],
    'and elements of one run under different fences'
);
select is(
    pg_temp.refusal(array[(select run_id from k)], array[1]::bigint[], array[0]::bigint[]),
    array['refused'] || pg_temp.error_of(
        format('select runlane.append_output(%s, 1, ''progress'', ''step'', 0)', (select run_id from k))
    ),
    'a number below 1 is refused as append_output refuses it'
);
select is(
    (pg_temp.refusal(array[(select run_id from k)], array[1]::bigint[], array[null]::bigint[]))[1:2],
    array['refused', '22004'],
    'an output without a number is refused (22004)'
);
select results_eq(
    format('select count(*)::int, max(r.write_seq) from runlane.run_outputs as o
        join runlane.runs as r using (org_id, run_id) where o.run_id = %s', (select run_id from k)),
    $$values (2, 2::bigint)$$,
    'the refused calls wrote nothing: two outputs, last applied write 2'
);

select is(
    pg_temp.refusal(
        array[(select run_id from k), (select run_id from k), (select run_id from k)],
        array[1, 1, 1]::bigint[], array[2, 3, 4]::bigint[]
    ),
    array['applied', null, null, null],
    'a batch whose first number was applied already is applied'
);
select is(
    (select count(*)::int from runlane.run_outputs where run_id = (select run_id from k)),
    4,
    'only its new numbers, 3 and 4, are written'
);
select is(
    (select write_seq from runlane.runs where run_id = (select run_id from k)),
    4::bigint,
    'the run records 4 as its last applied write'
);

-- extreme numbers are refused for their run, never an overflow that fails the call
select is(
    (pg_temp.refusal(
        array[(select run_id from k), (select run_id from k)],
        array[1, 1]::bigint[], array[9223372036854775807, -9223372036854775808]::bigint[]
    ))[1:3],
    array['refused', '22023', 'write_seq'],
    'numbers at both ends of bigint are refused as not consecutive'
);
select is(
    (pg_temp.refusal(array[(select run_id from k)], array[1]::bigint[], array[-9223372036854775808]::bigint[]))[1:2],
    array['refused', '22023'],
    'the lowest bigint is out of range'
);
select is(
    (pg_temp.refusal(array[(select run_id from k)], array[1]::bigint[], array[9223372036854775807]::bigint[]))[1:3],
    array['refused', '22023', 'write_seq'],
    'the highest skips ahead'
);

select * from finish();
rollback;
