-- On a schema before 0022 (charges.run_id NOT NULL: a charge cannot outlive its run, as
-- during a staged upgrade where the current functions already run) every erasure
-- answers 55000 with a hint and deletes nothing.
begin;
select plan(5);

do $$
begin
    perform runlane_test.agent('agent-e0', 'org-e0', null, 'user-e0');
    perform runlane_test.chat_turn('agent-e0', 'thread-e0', 'kept words');
end
$$;
alter table runlane.charges alter column run_id set not null;

select throws_ok(
    $$select runlane.erase_thread('agent-e0', 'thread-e0')$$, '55000',
    'erasure needs migration 0022 (charges kept without their run)', 'erase_thread'
);
select throws_ok($$select runlane.erase_agent('agent-e0')$$, '55000', null, 'erase_agent');
select throws_ok($$select runlane.erase_user('user-e0')$$, '55000', null, 'erase_user');
select throws_ok($$select runlane.erase_org('org-e0')$$, '55000', null, 'erase_org');
select is(
    runlane_test.rows_mentioning('kept words'), array['messages: 1', 'run_outputs: 1'], 'nothing was deleted'
);

select * from finish();
rollback;
