-- A chat thread's row records the thread's newest interactive run (threads.latest_run_id):
-- submit_message and the follow-up of held messages record the runs they create, and a
-- row that records nothing (written before the record existed) is searched once.
begin;
select plan(8);

do $$ begin perform runlane_test.agent('agent-a', 'org-a'); end $$;

create temp table first_message on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'hello');

select is(
    (select t.latest_run_id from runlane.threads as t where t.agent_id = 'agent-a' and t.thread_id = 'thread-1'),
    (select f.run_id from first_message as f),
    'a new thread records the run its first message created'
);

-- The run runs; a message is held; the run ends; the follow-up run is recorded.
do $$ begin perform runlane_test.claimed((select f.run_id from first_message as f)); end $$;
select is(
    (select s.disposition from runlane.submit_message('agent-a', 'thread-1', 'wait') as s),
    'held',
    'a message while the recorded run runs is held'
);
select lives_ok(
    format('select runlane.finish_run(%s, 1, ''succeeded'')', (select f.run_id from first_message as f)),
    'the run finishes'
);
select is(
    (select t.latest_run_id from runlane.threads as t where t.agent_id = 'agent-a' and t.thread_id = 'thread-1'),
    (select m.run_id from runlane.messages as m where m.body = 'wait'),
    'the follow-up run of the held message is recorded'
);
select isnt(
    (select t.latest_run_id from runlane.threads as t where t.agent_id = 'agent-a' and t.thread_id = 'thread-1'),
    (select f.run_id from first_message as f),
    'the follow-up is a new run'
);

-- A row that records nothing, with a queued run written directly: searched once.
insert into runlane.threads (org_id, agent_id, thread_id) values ('org-a', 'agent-a', 'thread-old');
do $$
begin
    perform runlane_test.queued_run('agent-a', 'interactive', 'interactive');
    update runlane.runs set thread_id = 'thread-old' where run_id = runlane_test.last_run('agent-a');
end
$$;
create temp table old_run on commit drop as select runlane_test.last_run('agent-a') as run_id;

select results_eq(
    $$select s.disposition, s.run_id from runlane.submit_message('agent-a', 'thread-old', 'back') as s$$,
    $$select 'steering'::text, o.run_id from old_run as o$$,
    'a message to a thread that recorded nothing finds its queued run'
);
select is(
    (select t.latest_run_id from runlane.threads as t where t.agent_id = 'agent-a' and t.thread_id = 'thread-old'),
    (select o.run_id from old_run as o),
    'and the thread''s row records it from then on'
);

-- A row that records nothing and has no unfinished run records 0, then the new run.
insert into runlane.threads (org_id, agent_id, thread_id) values ('org-a', 'agent-a', 'thread-empty');
create temp table empty_thread on commit drop as
select * from runlane.submit_message('agent-a', 'thread-empty', 'hi');
select results_eq(
    $$select e.disposition, t.latest_run_id from empty_thread as e
      join runlane.threads as t on t.agent_id = 'agent-a' and t.thread_id = 'thread-empty'$$,
    $$select 'created'::text, e.run_id from empty_thread as e$$,
    'a thread with no unfinished run gets a new run, recorded'
);

select * from finish();
rollback;
