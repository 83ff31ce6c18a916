-- erase_agent deletes the agent with every run, message (held ones too), output, journal
-- row, key and thread row of it, and nothing of another agent; its charges stay as
-- amounts, so the owner's weekly_spend is unchanged; afterwards every function answers
-- for the agent as for one that never existed, and its id can be used again.
begin;
select plan(14);

do $$
begin
    perform runlane_test.agent('agent-secret-ea', 'org-ea', null, 'owner-ea');
    perform runlane_test.agent('agent-kept-ea', 'org-ea', null, 'owner-ea');
    update runlane.agents set prompt = 'hidden prompt' where agent_id = 'agent-secret-ea';
    perform runlane_test.chat_turn('agent-secret-ea', 'thread-1', 'hidden words one', 2);
    perform runlane_test.chat_turn('agent-secret-ea', 'thread-2', 'hidden words two', 3);
    perform runlane_test.chat_turn('agent-kept-ea', 'thread-1', 'kept words', 4);
    -- a held message left on a thread (its run ended without a follow-up)
    insert into runlane.messages (org_id, agent_id, thread_id, body)
    values ('org-ea', 'agent-secret-ea', 'thread-3', 'hidden held words');
    insert into runlane.threads (org_id, agent_id, thread_id) values ('org-ea', 'agent-secret-ea', 'thread-3');
end
$$;

create temporary table spend_before on commit drop as
select runlane.weekly_spend('owner-ea') as spend;

select throws_ok(
    $$select runlane.erase_agent('agent-secret-ea')$$, '55006', null,
    'not while a run is unfinished'
) from (select runlane_test.queued_run('agent-secret-ea')) as q;
select is(runlane_test.rows_mentioning('agent-secret-ea')::text like '%agents: 1%', true, 'nothing was deleted');
update runlane.runs set state = 'canceled', finished_at = now() where agent_id = 'agent-secret-ea' and state = 'queued';

select is(runlane.erase_agent('agent-secret-ea'), 3, 'returns the runs erased');
select is(runlane_test.rows_mentioning('agent-secret-ea'), '{}', 'no row of any table names the agent');
select is(runlane_test.rows_mentioning('hidden'), '{}', 'no row holds its prompt or any of its text');
select is(runlane.weekly_spend('owner-ea'), (select s.spend from spend_before as s), 'the owner''s spend is unchanged');
select is(
    (select count(*) from runlane.charges as c where c.run_id is null), 2::bigint,
    'its charges stay as amounts without a run'
);
select is(
    runlane_test.rows_mentioning('kept words'), array['messages: 1', 'run_outputs: 1'],
    'the other agent is untouched'
);
select throws_ok(
    $$select runlane.erase_agent('agent-secret-ea')$$, 'RL008', 'unknown agent ''agent-secret-ea''',
    'erasing again answers as for an unknown agent'
);
select throws_ok(
    $$select * from runlane.submit_message('agent-secret-ea', 'thread-1', 'hi')$$, 'RL008',
    'unknown agent ''agent-secret-ea''', 'submit_message answers as for an unknown agent'
);
select throws_ok(
    $$select * from runlane.run_now('agent-secret-ea')$$, 'RL008', null, 'run_now answers as for an unknown agent'
);
select throws_ok(
    $$select * from runlane.agent_journal('agent-secret-ea')$$, 'RL008', null,
    'agent_journal answers as for an unknown agent'
);
select is(
    (runlane.put_agent('agent-secret-ea', '{"org_id": "org-ea", "owner_id": "owner-ea"}')).prompt, '',
    'the id makes a new, empty agent'
);
select throws_ok($$select runlane.erase_agent(null)$$, '22004', null, 'a null id: 22004');

select * from finish();
rollback;
