-- For a login scoped to one organization, get_agent and message_status answer another
-- organization's agent and message exactly as an unknown one (SQLSTATE, message, hint),
-- and read their own organization's as usual.
begin;
select plan(6);

do $$ begin perform runlane_test.agent('agent-a', 'org-a'); perform runlane_test.agent('agent-b', 'org-b'); end $$;
create temp table msg on commit drop as
select
    (select message_id from runlane.submit_message('agent-a', 't-1', 'mine')) as mine,
    (select message_id from runlane.submit_message('agent-b', 't-1', 'theirs')) as theirs,
    null::bigint as missing;
update msg set missing = (select max(message_id) + 1000 from runlane.messages);
grant select on msg to public;
create role rl_test_scoped_a login;
grant runlane_api to rl_test_scoped_a;
select runlane.scope_api_login('rl_test_scoped_a', 'org-a');

-- the answer to a call, the id named in it replaced: what a caller can compare
create function pg_temp.answer(p_sql text, p_id text) returns text
language plpgsql as $$
begin
    execute p_sql;
    return 'no error';
exception when others then
    declare
        v_state text; v_message text; v_hint text;
    begin
        get stacked diagnostics v_state = returned_sqlstate, v_message = message_text, v_hint = pg_exception_hint;
        return replace(v_state || ' / ' || v_message || ' / ' || v_hint, p_id, '<id>');
    end;
end;
$$;

set local session authorization rl_test_scoped_a;

select is(
    pg_temp.answer($$select runlane.get_agent('agent-b')$$, 'agent-b'),
    pg_temp.answer($$select runlane.get_agent('agent-zz')$$, 'agent-zz'),
    'get_agent: another organization''s agent answers as an unknown one'
);
select is(
    pg_temp.answer($$select runlane.get_agent('agent-zz')$$, 'agent-zz'),
    'RL008 / unknown agent ''<id>'' / ',
    'and that answer is RL008'
);
select is(
    runlane.get_agent('agent-a') ->> 'prompt', 'Summarize the day',
    'its own organization''s agent, with its prompt'
);
select is(
    pg_temp.answer(format('select runlane.message_status(%s)', (select theirs from msg)), (select theirs from msg)::text),
    pg_temp.answer(format('select runlane.message_status(%s)', (select missing from msg)), (select missing from msg)::text),
    'message_status: another organization''s message answers as an unknown one'
);
select is(
    pg_temp.answer(format('select runlane.message_status(%s)', (select missing from msg)), (select missing from msg)::text),
    'RL008 / unknown message <id> / ',
    'and that answer is RL008'
);
select is(
    (select state from runlane.message_status((select mine from msg))), 'queued',
    'its own organization''s message'
);

reset session authorization;
select * from finish();
rollback;
