-- A sequenced finish (the worker's: each run with its write sequence number) updates each
-- run once: the number is recorded by the closing update, not by an update of its own
-- before it. The record is the same (write_fence, write_seq), a resend of it writes
-- nothing and answers ok, and a fenced-out finish records nothing.
begin;
select plan(7);

do $$
begin
    perform runlane_test.agent('agent-seq', 'org-seq');
    perform runlane_test.agent('agent-out', 'org-seq');
end
$$;
create temp table f on commit drop as
select
    k.k,
    s.run_id,
    runlane_test.claimed(s.run_id) as fence
from (values ('plain'), ('output')) as k (k)
cross join lateral runlane.submit_message(
    case k.k when 'plain' then 'agent-seq' else 'agent-out' end, 'thread-' || k.k, 'hi'
) as s;

create temp table u0 on commit drop as
select n_tup_upd from pg_stat_xact_user_tables where relid = 'runlane.runs'::regclass;

create temp table r on commit drop as
select * from runlane.finish_runs(
    array(select run_id from f order by k), array(select fence from f order by k),
    array['succeeded', 'succeeded'], array[null, null]::text[],
    array[0, 0]::numeric[], array[1, 0],
    array['text'], array['reply'],
    array[1, 1]::bigint[]
);

select is(
    (select count(*) filter (where r.ok) from r),
    2::bigint,
    'both sequenced runs finish'
);

select is(
    (select n_tup_upd from pg_stat_xact_user_tables where relid = 'runlane.runs'::regclass)
    - (select u0.n_tup_upd from u0),
    2::bigint,
    'one update per run: the sequence number rides on the closing update'
);

select results_eq(
    $$
    select f.k, r.state, r.write_fence = f.fence, r.write_seq
    from f join runlane.runs as r on r.run_id = f.run_id
    order by f.k
    $$,
    $$ values ('output', 'succeeded', true, 1::bigint), ('plain', 'succeeded', true, 1::bigint) $$,
    'each run records its fence and number, as a separate update did'
);

create temp table u1 on commit drop as
select
    (select n_tup_upd from pg_stat_xact_user_tables where relid = 'runlane.runs'::regclass)
        as n_tup_upd,
    (select count(*) from runlane.run_events) as events;

select is(
    (
        select array_agg(x.ok order by x.run_id)
        from runlane.finish_runs(
            array(select run_id from f order by k), array(select fence from f order by k),
            array['succeeded', 'succeeded'], array[null, null]::text[],
            array[0, 0]::numeric[], array[1, 0],
            array['text'], array['reply'],
            array[1, 1]::bigint[]
        ) as x
    ),
    array[true, true],
    'a resend of the applied finishes answers ok'
);

select is(
    array[
        (select n_tup_upd from pg_stat_xact_user_tables where relid = 'runlane.runs'::regclass)
        - (select u1.n_tup_upd from u1),
        (select count(*) from runlane.run_events) - (select u1.events from u1)
    ],
    array[0, 0]::bigint[],
    'and writes nothing'
);

-- A caller fenced out (a newer claim) is refused, and its number is not recorded.
do $$
begin
    perform runlane_test.agent('agent-old', 'org-seq');
    insert into f (k, run_id, fence)
    select 'old', s.run_id, runlane_test.claimed(s.run_id)
    from runlane.submit_message('agent-old', 'thread-old', 'hi') as s;
    perform runlane_test.claimed((select f.run_id from f where f.k = 'old'));
end
$$;

select is(
    (
        select x.sqlstate
        from runlane.finish_runs(
            array[(select run_id from f where k = 'old')], array[(select fence from f where k = 'old')],
            array['succeeded'], array[null]::text[], array[0]::numeric[], array[0],
            '{}'::text[], '{}'::text[], array[1]::bigint[]
        ) as x
    ),
    'RL001',
    'a fenced-out sequenced finish is refused'
);

select is(
    (select r.write_seq from runlane.runs as r where r.run_id = (select run_id from f where k = 'old')),
    null::bigint,
    'and records no number'
);

select * from finish();
rollback;
