-- A run's source message is one of the run's own messages (migration 0016,
-- runs_source_message_of_run_fk), and the key is checked on runs_pkey, so the purge's
-- deletion of a message never scans the runs.
begin;
select plan(6);

do $$ begin perform runlane_test.agent('agent-a'); end $$;

create temp table first_chat on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'hello');
create temp table second_chat on commit drop as
select * from runlane.submit_message('agent-a', 'thread-2', 'hello again');

select is(
    (select m.run_id from runlane.messages as m where m.message_id = (select message_id from first_chat)),
    (select run_id from first_chat),
    'submit_message attaches the source message to the run it creates'
);

select throws_ok(
    $$update runlane.runs set source_message_id = (select message_id from second_chat)
      where run_id = (select run_id from first_chat)$$,
    '23503',
    null,
    'a run cannot name another run''s message as its source'
);

select throws_ok(
    $$insert into runlane.runs (org_id, agent_id, lane, trigger, state, source_message_id)
      select a.org_id, a.agent_id, 'interactive', 'interactive', 'queued', (select message_id from second_chat)
      from runlane.agents as a where a.agent_id = 'agent-a'$$,
    '23503',
    null,
    'a new run cannot take a message already attached to another run as its source'
);

select throws_ok(
    $$delete from runlane.messages where message_id = (select message_id from first_chat)$$,
    '23503',
    null,
    'a message that is a run''s source cannot be deleted while the run names it'
);

-- The deletion's check reads runs_pkey, not a scan of the runs. (On a runs table as
-- large as a deployment's, with fresh statistics: on the few rows of a test, or on a
-- table autovacuum has just truncated and counted empty, a scan is the cheaper plan and
-- says nothing about the key.)
insert into runlane.runs (org_id, agent_id, lane, trigger, state, prompt, model, finished_at)
select
    a.org_id,
    a.agent_id,
    'background' as lane,
    'manual' as trigger,
    'succeeded' as state,
    'x' as prompt,
    'noop' as model,
    now() as finished_at
from runlane.agents as a, generate_series(1, 2000) as g
where a.agent_id = 'agent-a';
analyze runlane.runs;

create temp table before_delete on commit drop as
select
    pg_stat_get_xact_numscans('runlane.runs'::regclass) as seq_scans,
    pg_stat_get_xact_numscans('runlane.runs_pkey'::regclass) as pkey_scans;

update runlane.runs set source_message_id = null where run_id = (select run_id from first_chat);
delete from runlane.messages where message_id = (select message_id from first_chat);
delete from runlane.runs where run_id = (select run_id from first_chat);

select is(
    pg_stat_get_xact_numscans('runlane.runs'::regclass) - (select b.seq_scans from before_delete as b),
    0::bigint,
    'deleting an unlinked source message and its run scans no runs'
);
select cmp_ok(
    pg_stat_get_xact_numscans('runlane.runs_pkey'::regclass) - (select b.pkey_scans from before_delete as b),
    '>=',
    1::bigint,
    'the key''s check on the message''s deletion probes runs_pkey'
);

select * from finish();
rollback;
