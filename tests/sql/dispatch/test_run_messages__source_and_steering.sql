-- run_messages returns the run's source and steering messages in order, to its owner only.
begin;
select plan(6);

do $$ begin perform runlane_test.agent('agent-a'); end $$;
create temp table s on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'first');
do $$ begin perform runlane.submit_message('agent-a', 'thread-1', 'second'); end $$;
do $$ begin perform runlane.submit_message('agent-a', 'thread-1', 'third'); end $$;
-- A message on another thread is not the run's.
do $$ begin perform runlane.submit_message('agent-a', 'thread-2', 'elsewhere'); end $$;

create temp table f on commit drop as
select runlane_test.claimed((select run_id from s)) as fence;

select results_eq(
    $$select body from runlane.run_messages((select run_id from s), (select fence from f))$$,
    $$values ('first'::text), ('second'), ('third')$$,
    'the owner reads the source and steering messages in submission order'
);

-- A message held while running is not the run's until it takes it.
do $$ begin perform runlane.submit_message('agent-a', 'thread-1', 'while running'); end $$;
select is(
    (select count(*)::int from runlane.run_messages((select run_id from s), (select fence from f))),
    3,
    'a held message is not returned before take_steering'
);
do $$ begin perform runlane.take_steering((select run_id from s), (select fence from f)); end $$;
select results_eq(
    $$select body from runlane.run_messages((select run_id from s), (select fence from f))$$,
    $$values ('first'::text), ('second'), ('third'), ('while running')$$,
    'after take_steering the taken message is the run''s, in order'
);

-- Re-claimed: the old fence is refused.
do $$ begin perform runlane_test.claimed((select run_id from s)); end $$;
select throws_ok(
    format('select * from runlane.run_messages(%s, %s)', (select run_id from s), (select fence from f)),
    'RL001', null, 'a fenced-out owner cannot read the run''s messages (RL001)'
);
select lives_ok(
    format('select * from runlane.run_messages(%s, %s)', (select run_id from s), (select fence + 1 from f)),
    'the new owner can read them'
);
select throws_ok(
    $$select * from runlane.run_messages(-1, 1)$$,
    'RL008', null, 'an unknown run is refused with RL008'
);

select * from finish();
rollback;
