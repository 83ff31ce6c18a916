-- claim_runs' idle-queue path (every eligible chat run fits in the claim, none bound to a
-- computer: found and locked in one statement) keeps the rules of the fair path: it returns
-- round robin order, leaves runs that are not awake alone, and one eligible run more than
-- the claim takes sends the claim down the fair path instead of first come, first served.
begin;
select plan(5);

do $$ begin perform runlane_test.org('org-a', 1000); end $$;
do $$ begin perform runlane_test.org('org-b', 1000); end $$;
do $$ begin perform runlane_test.org('org-c', 1000); end $$;

create temp table q (label text primary key, run_id bigint) on commit drop;
do $$
begin
    perform runlane_test.agent('a-chat', 'org-a');
    perform runlane_test.agent('b-chat', 'org-b');
    perform runlane_test.agent('c-chat', 'org-c');
    insert into q (label, run_id)
    select 'a' || i, runlane_test.queued_run('a-chat', 'interactive', 'interactive')
    from generate_series(1, 3) as i;
    insert into q (label, run_id)
    values ('b1', runlane_test.queued_run('b-chat', 'interactive', 'interactive'));
end
$$;

select is(
    (
        select array_agg(q.label order by c.ordinality)
        from runlane.claim_runs('w1', array['interactive'], 3) with ordinality as c
        inner join q on c.run_id = q.run_id
    ),
    array['a1', 'b1', 'a2'],
    'four eligible runs for a claim of three: round robin, not the three oldest'
);

insert into q (label, run_id)
values ('c1', runlane_test.queued_run('c-chat', 'interactive', 'interactive'));
insert into q (label, run_id)
values ('c2', runlane_test.queued_run('c-chat', 'interactive', 'interactive'));
update runlane.runs set wake_at = now() + interval '1 hour'
where run_id = (select run_id from q where label = 'c2');

select is(
    (
        select array_agg(q.label order by c.ordinality)
        from runlane.claim_runs('w2', array['interactive'], 10) with ordinality as c
        inner join q on c.run_id = q.run_id
    ),
    array['a3', 'c1'],
    'every awake run fits: all of them, in round robin order'
);
select is(
    (
        select state || '/' || attempts || '/' || fence from runlane.runs
        where run_id = (select run_id from q where label = 'c2')
    ),
    'queued/0/0',
    'the run that is not awake yet is untouched'
);
select is(
    (
        select count(*) from runlane.run_events
        where event = 'run.claimed' and run_id in (select run_id from q where label in ('a3', 'c1'))
    ),
    2::bigint,
    'each run the idle path claims is journaled once'
);
select is(
    (select count(*) from runlane.claim_runs('w3', array['interactive'], 10)),
    0::bigint,
    'nothing awake left: an empty claim'
);

select * from finish();
rollback;
