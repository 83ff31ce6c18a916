-- Finishing an interactive run dispatches the messages held on its thread while it ran:
-- a follow-up run sourced at the earliest held message.
begin;
select plan(6);

do $$
begin
    perform runlane_test.agent('agent-chat', 'org-chat', 'computer-chat');
    perform runlane_test.queued_run('agent-chat', 'interactive', 'interactive');
    update runlane.runs set thread_id = 'thread-1' where run_id = runlane_test.last_run('agent-chat');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-chat'), 'worker-1');
    insert into runlane.messages (org_id, agent_id, thread_id, body, created_at)
    values ('org-chat', 'agent-chat', 'thread-1', 'first held', now() - interval '2 seconds'),
           ('org-chat', 'agent-chat', 'thread-1', 'second held', now() - interval '1 second'),
           ('org-chat', 'agent-chat', 'thread-2', 'another thread', now());
end
$$;

select lives_ok(
    format('select runlane.finish_run(%s, 1, ''succeeded'')', runlane_test.last_run('agent-chat')),
    'the interactive run finishes'
);
select isnt(
    runlane_test.last_run('agent-chat'),
    (select min(r.run_id) from runlane.runs as r where r.agent_id = 'agent-chat'),
    'a follow-up run was created'
);
select results_eq(
    $$select r.state, r.lane, r.thread_id, r.computer_id from runlane.runs as r
      where r.run_id = runlane_test.last_run('agent-chat')$$,
    $$values ('queued'::text, 'interactive'::text, 'thread-1'::text, 'computer-chat'::text)$$,
    'the follow-up is a queued interactive run on the same thread and computer'
);
select is(
    (select r.source_message_id from runlane.runs as r where r.run_id = runlane_test.last_run('agent-chat')),
    (select min(m.message_id) from runlane.messages as m where m.thread_id = 'thread-1'),
    'the earliest held message is the follow-up''s source'
);
select is(
    (
        select count(*) from runlane.messages as m
        where m.thread_id = 'thread-1' and m.run_id = runlane_test.last_run('agent-chat')
    ),
    2::bigint,
    'every held message of the thread joins the follow-up'
);
select is(
    (select m.run_id from runlane.messages as m where m.thread_id = 'thread-2'),
    null,
    'a message of another thread stays where it was'
);

select * from finish();
rollback;
