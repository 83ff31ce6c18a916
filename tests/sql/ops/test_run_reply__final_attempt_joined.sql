-- run_reply: the reply is the visible output of the attempt that finished, joined in
-- order as one text (a restarted attempt's partial output and hidden kinds left out),
-- with the run's thread; unknown and null runs are refused.
begin;
select plan(5);

do $$ begin perform runlane_test.agent('agent-y', 'org-y'); end $$;
create temp table r on commit drop as
select s.run_id from runlane.submit_message('agent-y', 'thread-y', 'hello') as s;
create temp table c1 on commit drop as
select c.fence from runlane.claim_runs('w1', array['interactive']) as c;

do $$ begin
    perform runlane.append_output((select run_id from r), (select fence from c1), 'text', 'half an ');
    perform runlane.retry_run((select run_id from r), (select fence from c1), 'boom', interval '0');
end $$;
create temp table c2 on commit drop as
select c.fence from runlane.claim_runs('w2', array['interactive']) as c;
do $$ begin
    perform runlane.append_output((select run_id from r), (select fence from c2), 'text', 'Hello, ');
    perform runlane.append_output((select run_id from r), (select fence from c2), 'reasoning', 'hidden');
    perform runlane.append_output((select run_id from r), (select fence from c2), 'text', 'world');
    perform runlane.append_output((select run_id from r), (select fence from c2), 'final', '!');
    perform runlane.finish_run((select run_id from r), (select fence from c2), 'succeeded');
end $$;

select results_eq(
    $$select thread_id, reply, parts, reply_chars from runlane.run_reply((select run_id from r))$$,
    $$values ('thread-y'::text, 'Hello, world!'::text, 3, 13)$$,
    'the finished attempt''s visible outputs, joined in order, with the thread'
);

do $$ begin perform runlane_test.agent('agent-z', 'org-y'); end $$;
create temp table quiet on commit drop as
select runlane_test.queued_run('agent-z') as run_id;
select results_eq(
    $$select thread_id, reply, parts from runlane.run_reply((select run_id from quiet))$$,
    $$values (null::text, ''::text, 0)$$,
    'a run without output or thread: an empty reply'
);
select throws_ok(
    $$select * from runlane.run_reply(-1)$$, 'RL008', null, 'an unknown run is refused'
);
select throws_ok(
    $$select * from runlane.run_reply(null)$$, '22004', null, 'a null run is refused'
);
select function_privs_are(
    'runlane', 'run_reply', array['bigint'], 'runlane_worker', array[]::text[],
    'a worker never reads a reply back'
);

select * from finish();
rollback;
