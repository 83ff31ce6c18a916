-- run_messages_many reads the runs it is given by their primary key, whatever the
-- statistics say: with statistics gathered while every run was queued (a burst of
-- messages, then a drain), it must not walk every running run of every worker (through
-- an index holding them, runs_running_idx before migration 0014) on each call, which made
-- the read grow with the runs in flight.
begin;
select plan(3);

do $$ begin perform runlane_test.agent('agent-m', 'org-m'); end $$;

create temp table s on commit drop as
select
    g as n,
    (runlane.submit_message('agent-m', 'thread-' || g, 'hello ' || g)).run_id as run_id
from generate_series(1, 3000) as g;

analyze runlane.runs;
analyze runlane.messages;

-- 2,000 runs in flight on other workers; ours are the last 10.
update runlane.runs as r
set state = 'running', fence = 1, lease_owner = 'someone', lease_expires_at = now() + interval '1 minute'
where r.run_id in (select s.run_id from s where s.n <= 2000 or s.n > 2990);

create temp table before_read on commit drop as
select
    (
        select sum(pg_stat_get_xact_tuples_returned(i.indexrelid))::bigint
        from pg_index as i
        where
            i.indrelid = 'runlane.runs'::regclass
            and i.indexrelid <> 'runlane.runs_pkey'::regclass
    ) as running_entries,
    pg_stat_get_xact_tuples_returned('runlane.runs_pkey'::regclass) as pkey_entries;

create temp table got on commit drop as
select x.*
from runlane.run_messages_many(
    array(select s.run_id from s where s.n > 2990 order by s.n),
    array_fill(1::bigint, array[10])
) as x;

select is(
    (select count(*) from got),
    10::bigint,
    'the read returns the message of each of the 10 runs'
);

select cmp_ok(
    (
        select sum(pg_stat_get_xact_tuples_returned(i.indexrelid))::bigint
        from pg_index as i
        where
            i.indrelid = 'runlane.runs'::regclass
            and i.indexrelid <> 'runlane.runs_pkey'::regclass
    )
    - (select b.running_entries from before_read as b),
    '<',
    100::bigint,
    'the read does not walk the 2,010 running runs through any other index'
);

select cmp_ok(
    pg_stat_get_xact_tuples_returned('runlane.runs_pkey'::regclass)
    - (select b.pkey_entries from before_read as b),
    '>=',
    10::bigint,
    'it looks its runs up by primary key'
);

select * from finish();
rollback;
