-- A message that creates its run is written once: the message and the run point at each
-- other from their first version (no insert of the message then an update of it), and
-- the ids returned are the rows'.
begin;
select plan(4);

do $$ begin perform runlane_test.agent('agent-once', 'org-once'); end $$;

create temp table m0 on commit drop as
select
    n_tup_ins,
    n_tup_upd
from pg_stat_xact_user_tables
where relid = 'runlane.messages'::regclass;

create temp table s on commit drop as
select * from runlane.submit_message('agent-once', 'thread-1', 'hello');

select is(
    (select disposition from s),
    'created',
    'the message creates its run'
);

select is(
    (
        select array[t.n_tup_ins - coalesce(m0.n_tup_ins, 0), t.n_tup_upd - coalesce(m0.n_tup_upd, 0)]
        from pg_stat_xact_user_tables as t
        left join m0 on true
        where t.relid = 'runlane.messages'::regclass
    ),
    array[1, 0]::bigint[],
    'the message row is inserted once and never updated'
);

select results_eq(
    $$
    select m.run_id, r.source_message_id, r.state, r.lane
    from s
    join runlane.messages as m on m.message_id = s.message_id
    join runlane.runs as r on r.org_id = m.org_id and r.run_id = s.run_id
    $$,
    $$ select s.run_id, s.message_id, 'queued'::text, 'interactive'::text from s $$,
    'the message is attached to the run and is its source'
);

select is(
    (select d.disposition from runlane.submit_message('agent-once', 'thread-1', 'more') as d),
    'steering',
    'the next message joins the queued run'
);

select * from finish();
rollback;
