-- purge_finished deletes only messages attached to a purged run: a message held on a
-- still active thread (run_id null) is kept, even older than the window, as are the
-- thread's lock row and a message attached to a run that is still queued.
begin;
select plan(4);

do $$
declare
    v_queued bigint;
begin
    perform runlane_test.agent('agent-chat', 'org-chat');
    perform runlane_test.aged_run('agent-chat', interval '20 days', 1, 'thread-live');
    insert into runlane.threads (org_id, agent_id, thread_id, created_at)
    values ('org-chat', 'agent-chat', 'thread-live', now() - interval '20 days');
    -- held while the thread's run was busy, and old: still waiting for a run
    insert into runlane.messages (org_id, agent_id, thread_id, body, created_at)
    values ('org-chat', 'agent-chat', 'thread-live', 'still waiting', now() - interval '20 days');
    v_queued := runlane_test.queued_run('agent-chat', 'interactive', 'interactive');
    update runlane.runs set thread_id = 'thread-queued' where run_id = v_queued;
    insert into runlane.messages (org_id, agent_id, thread_id, body, created_at, run_id)
    values ('org-chat', 'agent-chat', 'thread-queued', 'queued one', now() - interval '20 days', v_queued);
end
$$;

select is(runlane.purge_finished(interval '8 days'), 1, 'the finished run is purged');
select results_eq(
    'select body, run_id is null from runlane.messages order by message_id',
    $$values ('still waiting'::text, true), ('queued one'::text, false)$$,
    'the held message and the queued run''s message are kept'
);
select is(
    (select count(*) from runlane.messages where body = 'hello'), 0::bigint,
    'the purged run''s own message is gone'
);
select is((select count(*) from runlane.threads), 1::bigint, 'the thread''s lock row is kept');

select * from finish();
rollback;
