-- submit_message on a thread with no unfinished interactive run creates one.
begin;
select plan(14);

do $$ begin perform runlane_test.agent('agent-a', p_computer_id => 'computer-1'); end $$;

create temp table submitted on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'hello there');

select is((select disposition from submitted), 'created', 'a first message creates a run');
select isnt((select run_id from submitted), null, 'the created run id is returned');
select is(
    (select m.run_id from runlane.messages as m where m.message_id = (select message_id from submitted)),
    (select run_id from submitted),
    'the message row is attached to the created run'
);
select is(
    (select r.source_message_id from runlane.runs as r where r.run_id = (select run_id from submitted)),
    (select message_id from submitted),
    'the created run''s source message is the submitted message'
);
select results_eq(
    $$select r.lane, r.trigger, r.state, r.thread_id, r.attempts, r.fence
      from runlane.runs as r where r.run_id = (select run_id from submitted)$$,
    $$values ('interactive'::text, 'interactive'::text, 'queued'::text, 'thread-1'::text, 0, 0::bigint)$$,
    'the created run is a queued interactive run on the thread, not yet attempted'
);
select results_eq(
    $$select r.org_id, r.prompt, r.model, r.computer_id
      from runlane.runs as r where r.run_id = (select run_id from submitted)$$,
    $$select a.org_id, a.prompt, a.model, a.computer_id from runlane.agents as a where a.agent_id = 'agent-a'$$,
    'org, prompt, model and computer come from the agent'
);
select results_eq(
    $$select m.org_id, m.agent_id, m.thread_id, m.body
      from runlane.messages as m where m.message_id = (select message_id from submitted)$$,
    $$values ('org-a'::text, 'agent-a'::text, 'thread-1'::text, 'hello there'::text)$$,
    'the message is stored with its agent, organization, thread and body'
);

-- A thread is (agent, thread): the same thread id on another agent is another thread.
do $$ begin perform runlane_test.agent('agent-b'); end $$;
select is(
    (select disposition from runlane.submit_message('agent-b', 'thread-1', 'hi b')),
    'created',
    'the same thread id on another agent is a different thread and gets its own run'
);

-- Another thread of the same agent is independent.
select is(
    (select disposition from runlane.submit_message('agent-a', 'thread-2', 'other thread')),
    'created',
    'another thread of the same agent gets its own run'
);

-- A finished run does not capture new messages: a new run is created.
update runlane.runs set state = 'succeeded', finished_at = now()
where run_id = (select run_id from submitted);
create temp table after_finish on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'after finish');
select is((select disposition from after_finish), 'created', 'after the thread''s run finished, a message creates a new run');
select isnt((select run_id from after_finish), (select run_id from submitted), 'the new run is not the finished one');

-- Chat is not gated by the agent's switches.
update runlane.agents set enabled = false, admin_locked = true where agent_id = 'agent-b';
update runlane.runs set state = 'succeeded' where agent_id = 'agent-b';
select is(
    (select disposition from runlane.submit_message('agent-b', 'thread-1', 'still chatting')),
    'created',
    'a switched-off, admin-locked agent still gets chat runs (switches gate triggering, not chat)'
);

-- A background run on the same thread id does not take chat messages.
do $$ begin perform runlane_test.agent('agent-c'); end $$;
update runlane.agents set thread_id = 'thread-9' where agent_id = 'agent-c';
do $$ begin perform runlane_test.queued_run('agent-c', 'background', 'manual'); end $$;
select is(
    (select disposition from runlane.submit_message('agent-c', 'thread-9', 'chat')),
    'created',
    'a queued background run on the thread id does not capture a chat message'
);
select is(
    (select count(*)::int from runlane.runs where agent_id = 'agent-c' and lane = 'interactive'),
    1,
    'exactly one interactive run exists for that thread'
);

select * from finish();
rollback;
