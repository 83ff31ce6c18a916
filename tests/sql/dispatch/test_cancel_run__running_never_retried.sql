-- A running run asked to stop is never retried, released back or requeued: retry_run,
-- release_run and reap_stale close it canceled; messages held behind a stopped chat run
-- go to a follow-up run, as on any finish.
begin;
select plan(11);

do $$ begin perform runlane_test.agent('agent-n', 'org-n'); end $$;

-- retry_run
create temp table a on commit drop as select runlane_test.queued_run('agent-n') as run_id;
create temp table fa on commit drop as select runlane_test.claimed((select run_id from a)) as fence;
select is(runlane.cancel_run((select run_id from a)), 'running', 'Stop asked');
select is(
    runlane.retry_run((select run_id from a), (select fence from fa), 'boom', interval '0'),
    'canceled',
    'retry_run of a stopped run answers canceled'
);
select is(
    (select state from runlane.runs where run_id = (select run_id from a)), 'canceled',
    'the stopped run is not queued again'
);

-- release_run (a worker shutting down)
create temp table b on commit drop as select runlane_test.queued_run('agent-n') as run_id;
create temp table fb on commit drop as select runlane_test.claimed((select run_id from b)) as fence;
do $$ begin perform runlane.cancel_run((select run_id from b)); end $$;
select is(
    runlane.release_run((select run_id from b), (select fence from fb), null, 'shutdown'),
    false,
    'release_run of a stopped run hands nothing back'
);
select is(
    (select state from runlane.runs where run_id = (select run_id from b)), 'canceled',
    'the released stopped run is canceled'
);

-- reap_stale (its worker died after the Stop): an interactive run with attempts left
create temp table c on commit drop as select runlane_test.queued_run('agent-n', 'interactive', 'interactive') as run_id;
do $$ begin perform runlane_test.claimed((select run_id from c)); end $$;
do $$ begin perform runlane.cancel_run((select run_id from c)); end $$;
do $$ begin perform runlane_test.lease_expired((select run_id from c)); end $$;
select results_eq(
    $$select state, reason from runlane.reap_stale() where run_id = (select run_id from c)$$,
    $$values ('canceled'::text, 'canceled'::text)$$,
    'reap_stale closes a stopped run canceled instead of requeueing it'
);

-- a chat run with a message held behind it
create temp table chat on commit drop as
select * from runlane.submit_message('agent-n', 'thread-n', 'first');
create temp table fc on commit drop as select runlane_test.claimed((select run_id from chat)) as fence;
create temp table held on commit drop as
select * from runlane.submit_message('agent-n', 'thread-n', 'waiting');
select is((select disposition from held), 'held', 'a message waits behind the running chat run');
select is(runlane.cancel_run((select run_id from chat)), 'running', 'the chat run is asked to stop');
select is(
    (select m.run_id from runlane.messages as m where m.message_id = (select message_id from held)),
    null,
    'the held message still waits while the stop is on its way'
);
do $$ begin perform runlane.finish_run((select run_id from chat), (select fence from fc), 'succeeded'); end $$;
select results_eq(
    $$select r.state, r.trigger from runlane.messages as m
      inner join runlane.runs as r on r.org_id = m.org_id and r.run_id = m.run_id
      where m.message_id = (select message_id from held)$$,
    $$values ('queued'::text, 'interactive'::text)$$,
    'once the stopped run ends canceled, the held message is handed to a follow-up run'
);
select is(
    (select state from runlane.runs where run_id = (select run_id from chat)), 'canceled',
    'the stopped chat run ended canceled'
);

select * from finish();
rollback;
