-- A write number above the run's last applied one + 1 skips ahead: every sequenced write
-- (append_output, charge, save_checkpoint, take_steering, finish_run, release_run,
-- retry_run, finish_runs) refuses it with 22023 (COLUMN write_seq, the message naming the
-- next number) and writes nothing, so one forged high number cannot turn the owner's later
-- writes into silent resends. A new attempt starts at 1. A resent end whose number another
-- write took is answered as applied only when the run ended: while it still runs, the
-- finish, retry and release are refused (22023) and nothing is closed.
begin;
select plan(24);

create function pg_temp.error_column(p_sql text)
returns text
language plpgsql
as $$
declare
    v_column text;
begin
    execute p_sql;
    return null;
exception when others then
    get stacked diagnostics v_column = column_name;
    return v_column;
end;
$$;

do $$
begin
    perform runlane_test.agent('agent-skip', 'org-skip');
    perform runlane_test.claimed(runlane_test.queued_run('agent-skip', 'interactive', 'interactive'));
end
$$;

create temp table k on commit drop as
select
    r.run_id,
    r.fence
from runlane.runs as r where r.agent_id = 'agent-skip';

select is(
    runlane.append_output((select run_id from k), (select fence from k), 'progress', 'one', 1),
    null, 'write 1 is applied'
);
select throws_like(
    format(
        'select runlane.append_output(%s, %s, ''text'', ''forged'', 1000000)',
        (select run_id from k), (select fence from k)
    ),
    '%write number 1000000 skips ahead%next is 2%',
    'a number far ahead is refused, naming the next one'
);
select is(
    pg_temp.error_column(format(
        'select runlane.append_output(%s, %s, ''text'', ''x'', 3)',
        (select run_id from k), (select fence from k)
    )),
    'write_seq', 'the refusal names the column write_seq (22023 told apart without its text)'
);
select throws_ok(
    format('select runlane.charge(%s, %s, 1, 3)', (select run_id from k), (select fence from k)),
    '22023', null, 'charge refuses a number that skips ahead'
);
select throws_ok(
    format('select runlane.save_checkpoint(%s, %s, ''{}''::jsonb, 3)', (select run_id from k), (select fence from k)),
    '22023', null, 'so does save_checkpoint'
);
select throws_ok(
    format('select * from runlane.take_steering(%s, %s, 3)', (select run_id from k), (select fence from k)),
    '22023', null, 'and take_steering'
);
select throws_ok(
    format('select runlane.finish_run(%s, %s, ''succeeded'', null, 0, 3)', (select run_id from k), (select fence from k)),
    '22023', null, 'and finish_run'
);
select throws_ok(
    format('select runlane.release_run(%s, %s, null, ''shutdown'', 3)', (select run_id from k), (select fence from k)),
    '22023', null, 'and release_run'
);
select throws_ok(
    format('select runlane.retry_run(%s, %s, ''boom'', interval ''1 minute'', 3)', (select run_id from k), (select fence from k)),
    '22023', null, 'and retry_run'
);
select results_eq(
    format(
        $$select f.ok, f.sqlstate from runlane.finish_runs(array[%s]::bigint[], array[%s]::bigint[],
            array['succeeded'], array[null]::text[], array[0]::numeric[], array[1], array['text'],
            array['x'], array[3]::bigint[]) as f$$,
        (select run_id from k), (select fence from k)
    ),
    $$values (false, '22023'::text)$$,
    'and finish_runs, for that run'
);
select results_eq(
    format('select r.state, r.write_seq, r.cost, r.checkpoint from runlane.runs as r where r.run_id = %s', (select run_id from k)),
    format('values (%L::text, 1::bigint, 0::numeric, null::jsonb)', 'running'),
    'nothing was written: still running, last applied write 1'
);
select is(
    (select count(*) from runlane.run_outputs where run_id = (select run_id from k)),
    1::bigint, 'one output, the first'
);
select is(
    runlane.append_output((select run_id from k), (select fence from k), 'text', 'two', 2) ->> 'event',
    'run.first_response', 'the owner''s next write, 2, is applied'
);
select is(
    (select count(*) from runlane.run_outputs where run_id = (select run_id from k) and body = 'two'),
    1::bigint, 'and written'
);

-- Number 2 is taken (by an output): an end sent with it did not happen.
select throws_like(
    format('select runlane.finish_run(%s, %s, ''succeeded'', null, 0, 2)', (select run_id from k), (select fence from k)),
    '%write number 2 of run % was applied, but not as its finish: the run is running%',
    'a finish whose number an output took is refused, not answered as applied'
);
select throws_ok(
    format('select runlane.retry_run(%s, %s, ''boom'', interval ''1 minute'', 2)', (select run_id from k), (select fence from k)),
    '22023', null, 'so is such a retry'
);
select throws_ok(
    format('select runlane.release_run(%s, %s, null, ''shutdown'', 2)', (select run_id from k), (select fence from k)),
    '22023', null, 'and such a release'
);
select results_eq(
    format(
        $$select f.ok, f.sqlstate from runlane.finish_runs(array[%s]::bigint[], array[%s]::bigint[],
            array['succeeded'], array[null]::text[], array[0]::numeric[], array[0], '{}'::text[],
            '{}'::text[], array[2]::bigint[]) as f$$,
        (select run_id from k), (select fence from k)
    ),
    $$values (false, '22023'::text)$$,
    'and such a finish in finish_runs'
);
select is(
    (select count(*) from runlane.run_events where run_id = (select run_id from k) and event = 'run.finished'),
    0::bigint, 'no run.finished was journaled'
);

-- The owner's real finish, 3, then its resend: the run ended, so the resend is answered.
select is(
    runlane.finish_run((select run_id from k), (select fence from k), 'succeeded', null, 0, 3) ->> 'run.outcome',
    'succeeded', 'the finish numbered 3 closes the run'
);
select is(
    runlane.finish_run((select run_id from k), (select fence from k), 'succeeded', null, 0, 3) ->> 'run.outcome',
    'succeeded', 'its resend is answered with the run.finished row'
);

-- A new attempt numbers from 1: its first write may not be 2.
do $$
begin
    perform runlane_test.agent('agent-new', 'org-skip');
    perform runlane_test.claimed(runlane_test.queued_run('agent-new', 'interactive', 'interactive'));
end
$$;
select throws_ok(
    format(
        'select runlane.append_output(%s, %s, ''text'', ''x'', 2)',
        runlane_test.last_run('agent-new'), (select fence from runlane.runs where run_id = runlane_test.last_run('agent-new'))
    ),
    '22023', null, 'a new attempt''s first write numbered 2 is refused'
);
select is(
    runlane.append_output(
        runlane_test.last_run('agent-new'),
        (select fence from runlane.runs where run_id = runlane_test.last_run('agent-new')), 'progress', 'x', 1
    ),
    null, 'numbered 1 it is applied'
);
select is(
    runlane.append_output(
        runlane_test.last_run('agent-new'),
        (select fence from runlane.runs where run_id = runlane_test.last_run('agent-new')), 'progress', 'x', null
    ),
    null, 'an unnumbered write is never checked'
);

select * from finish();
rollback;
