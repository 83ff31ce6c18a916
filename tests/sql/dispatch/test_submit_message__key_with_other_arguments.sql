-- submit_message / run_now (keyed): a key reused with other arguments is RL010 and
-- changes nothing; the same key on another agent is another key.
begin;
select plan(8);

do $$ begin perform runlane_test.agent('agent-k'); end $$;
do $$ begin perform runlane_test.agent('agent-l'); end $$;

create temp table first_call on commit drop as
select * from runlane.submit_message('agent-k', 'thread-1', 'hello', 'key-1');

select throws_ok(
    $$select * from runlane.submit_message('agent-k', 'thread-1', 'hello again', 'key-1')$$,
    'RL010',
    'idempotency key ''key-1'' of agent ''agent-k'' was already used for another request',
    'the same key with another body is RL010'
);
select throws_ok(
    $$select * from runlane.submit_message('agent-k', 'thread-2', 'hello', 'key-1')$$,
    'RL010', null,
    'the same key with another thread is RL010'
);
select throws_ok(
    $$select * from runlane.run_now('agent-k', 'key-1')$$,
    'RL010', null,
    'the same key for run_now is RL010'
);
create function pg_temp.hint_of(p_sql text) returns text language plpgsql as $$
declare v_hint text;
begin
    execute p_sql;
    return null;
exception when sqlstate 'RL010' then
    get stacked diagnostics v_hint = pg_exception_hint;
    return v_hint;
end $$;
select is(
    pg_temp.hint_of($$select * from runlane.submit_message('agent-k', 'thread-1', 'x', 'key-1')$$),
    'A key names one request: retry with exactly the same arguments, or use a new key for a new request.',
    'RL010 says what to do'
);
select is(
    (select count(*)::int from runlane.messages where agent_id = 'agent-k'), 1,
    'the refused calls stored no message'
);
select is(
    (select count(*)::int from runlane.runs where agent_id = 'agent-k'), 1,
    'the refused calls created no run'
);

-- Keys belong to an agent: another agent may use the same key for anything.
select is(
    (select disposition from runlane.submit_message('agent-l', 'thread-9', 'other', 'key-1')),
    'created',
    'another agent reuses the key for its own message'
);
select is((runlane.run_now('agent-l', 'key-2')).state, 'queued', 'and a fresh key works for run_now');

select * from finish();
rollback;
