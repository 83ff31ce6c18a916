-- For a login scoped to one organization, send_message answers another organization's
-- agent exactly as an unknown one and exactly as submit_message does (SQLSTATE, message,
-- hint), keyed or not, and sends its own organization's messages.
begin;
select plan(5);

do $$ begin perform runlane_test.agent('agent-a', 'org-a'); perform runlane_test.agent('agent-b', 'org-b'); end $$;
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
    pg_temp.answer($$select runlane.send_message('agent-b', 't-1', 'hi')$$, 'agent-b'),
    'RL008 / unknown agent ''<id>'' / ',
    'another organization''s agent: RL008'
);
select is(
    pg_temp.answer($$select runlane.send_message('agent-b', 't-1', 'hi')$$, 'agent-b'),
    pg_temp.answer($$select runlane.send_message('agent-zz', 't-1', 'hi')$$, 'agent-zz'),
    'answered exactly as an unknown agent'
);
select is(
    pg_temp.answer($$select runlane.send_message('agent-b', 't-1', 'hi')$$, 'agent-b'),
    pg_temp.answer($$select runlane.submit_message('agent-b', 't-1', 'hi')$$, 'agent-b'),
    'and exactly as submit_message answers'
);
select is(
    pg_temp.answer($$select runlane.send_message('agent-b', 't-1', 'hi', 'k-1')$$, 'agent-b'),
    pg_temp.answer($$select runlane.submit_message('agent-b', 't-1', 'hi', 'k-1')$$, 'agent-b'),
    'the keyed form too'
);
select is(
    (select disposition from runlane.send_message('agent-a', 't-1', 'mine')), 'created',
    'its own organization''s agent gets the message'
);

reset session authorization;
select * from finish();
rollback;
