-- erase_thread refuses (55006) while a run of the thread is queued or running, whatever
-- its lane, and deletes nothing; unknown agents answer RL008, bad ids 22004 / 22023.
begin;
select plan(9);

do $$
begin
    perform runlane_test.agent('agent-eu', 'org-eu');
    perform runlane_test.chat_turn('agent-eu', 'thread-eu', 'finished words');
    perform runlane.submit_message('agent-eu', 'thread-eu', 'queued words');
end
$$;

create temporary table before on commit drop as
select runlane_test.rows_mentioning('words') as rows;

select throws_ok(
    $$select runlane.erase_thread('agent-eu', 'thread-eu')$$, '55006',
    format(
        'thread ''thread-eu'' of agent ''agent-eu'' has an unfinished run (run %s, queued)',
        (select r.run_id from runlane.runs as r where r.state = 'queued' and r.agent_id = 'agent-eu')
    ),
    'a queued chat run refuses the erasure'
);
select is(
    runlane_test.error_hint($$select runlane.erase_thread('agent-eu', 'thread-eu')$$),
    'Cancel it with runlane.cancel_run and erase again once it has finished; nothing was erased.',
    'the hint says what to do'
);
select is(runlane_test.rows_mentioning('words'), (select b.rows from before as b), 'nothing was deleted');

do $$
begin
    perform runlane_test.claimed((select r.run_id from runlane.runs as r where r.state = 'queued' and r.agent_id = 'agent-eu'));
end
$$;
select throws_ok(
    $$select runlane.erase_thread('agent-eu', 'thread-eu')$$, '55006', null, 'a running chat run refuses it'
);

do $$
begin
    update runlane.runs set state = 'succeeded', finished_at = now() where agent_id = 'agent-eu';
    insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt)
    values ('org-eu', 'agent-eu', 'background', 'manual', 'thread-eu', 'p');
end
$$;
select throws_ok(
    $$select runlane.erase_thread('agent-eu', 'thread-eu')$$, '55006', null,
    'a queued background run writing into the thread refuses it'
);

select throws_ok(
    $$select runlane.erase_thread('agent-nobody', 'thread-eu')$$, 'RL008', 'unknown agent ''agent-nobody''',
    'an unknown agent answers RL008'
);
select throws_ok($$select runlane.erase_thread('agent-eu', null)$$, '22004', null, 'a null thread id: 22004');
select throws_ok($$select runlane.erase_thread(null, 'thread-eu')$$, '22004', null, 'a null agent id: 22004');
select throws_ok($$select runlane.erase_thread('agent-eu', ' ')$$, '22023', null, 'a blank thread id: 22023');

select * from finish();
rollback;
