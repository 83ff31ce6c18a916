-- save_checkpoint stores the owner's checkpoint and refuses a fenced-out owner.
begin;
select plan(5);

do $$ begin perform runlane_test.agent('agent-a'); end $$;
create temp table r on commit drop as
select runlane_test.queued_run('agent-a', 'interactive', 'interactive') as run_id;
create temp table f on commit drop as
select runlane_test.claimed((select run_id from r)) as fence;

do $$ begin perform runlane.save_checkpoint((select run_id from r), (select fence from f), '{"step": 3}'); end $$;
select is(
    (select checkpoint from runlane.runs where run_id = (select run_id from r)),
    '{"step": 3}'::jsonb,
    'the owner''s checkpoint is stored on the run'
);

do $$ begin perform runlane_test.claimed((select run_id from r)); end $$;
select throws_ok(
    format('select runlane.save_checkpoint(%s, %s, %L)', (select run_id from r), (select fence from f), '{"step": 9}'),
    'RL001', null, 'after a re-claim, the old owner cannot save a checkpoint (RL001)'
);
select is(
    (select checkpoint from runlane.runs where run_id = (select run_id from r)),
    '{"step": 3}'::jsonb,
    'the refused checkpoint did not overwrite the stored one'
);
select lives_ok(
    format('select runlane.save_checkpoint(%s, %s, %L)', (select run_id from r), (select fence + 1 from f), '{"step": 4}'),
    'the new owner can save its checkpoint'
);
select throws_ok(
    $$select runlane.save_checkpoint(-1, 1, '{}')$$,
    'RL008', null, 'save_checkpoint on an unknown run is refused with RL008'
);

select * from finish();
rollback;
