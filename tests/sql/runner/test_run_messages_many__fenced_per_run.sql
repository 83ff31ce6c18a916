-- run_messages_many returns each owned run's messages (as run_messages would), and
-- nothing for a run the caller no longer owns, without failing the others.
begin;
select plan(7);

do $$ begin perform runlane_test.agent('agent-a'); perform runlane_test.agent('agent-b'); end $$;
create temp table s on commit drop as
select
    'a' as k,
    *
from runlane.submit_message('agent-a', 'thread-1', 'a first')
union all
select
    'b' as k,
    *
from runlane.submit_message('agent-b', 'thread-1', 'b first');
do $$ begin perform runlane.submit_message('agent-a', 'thread-1', 'a second'); end $$;
create temp table f on commit drop as
select
    s.k,
    s.run_id,
    runlane_test.claimed(s.run_id) as fence
from s;

select results_eq(
    $$select m.run_id, m.body from runlane.run_messages_many(
        array(select run_id from f order by k desc), array(select fence from f order by k desc)) as m$$,
    $$select s.run_id, v.body from s
      inner join (values ('a', 'a first'), ('a', 'a second'), ('b', 'b first')) as v (k, body)
          on v.k = s.k
      order by s.run_id, v.body$$,
    'every owned run''s messages, by run then submission order'
);
select results_eq(
    $$select m.message_id, m.body, m.created_at from runlane.run_messages_many(
        array(select run_id from f where k = 'a'), array(select fence from f where k = 'a')) as m$$,
    $$select * from runlane.run_messages((select run_id from f where k = 'a'), (select fence from f where k = 'a'))$$,
    'a run''s rows are exactly what run_messages returns for it'
);

-- Run b is claimed again by someone else: the old fence reads nothing of b, a still works.
do $$ begin perform runlane_test.claimed((select run_id from f where k = 'b')); end $$;
select results_eq(
    $$select distinct m.run_id from runlane.run_messages_many(
        array(select run_id from f), array(select fence from f)) as m$$,
    $$select run_id from f where k = 'a'$$,
    'a fenced-out run yields no rows while the owned run''s rows still come back'
);
select is_empty(
    $$select * from runlane.run_messages_many(array[-1, (select run_id from f where k = 'a')]::bigint[],
                                             array[1, (select fence + 5 from f where k = 'a')]::bigint[])$$,
    'an unknown run or a wrong fence yields nothing, never another owner''s messages'
);
select throws_ok(
    $$select * from runlane.run_messages_many(array[1, 2]::bigint[], array[1]::bigint[])$$,
    '22023', null, 'arrays of different lengths are refused with 22023'
);
select throws_ok(
    $$select * from runlane.run_messages_many(null, array[1]::bigint[])$$,
    '22004', null, 'a null array is refused with 22004'
);
select is_empty(
    $$select * from runlane.run_messages_many('{}'::bigint[], '{}'::bigint[])$$,
    'an empty batch returns nothing'
);

select * from finish();
rollback;
