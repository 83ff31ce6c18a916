-- Interactive-class work (interactive, manual, test, retry) is taken before scheduled and
-- reaction work, oldest first within a class; lanes are claimed only when asked for.
begin;
select plan(4);

do $$ begin perform runlane_test.org('org-a', 100); end $$;
select runlane_test.agent('agent-' || i, 'org-a') from generate_series(1, 6) as i;
create temp table r on commit drop as
select
    runlane_test.queued_run('agent-1', 'background', 'scheduled') as scheduled,
    runlane_test.queued_run('agent-2', 'background', 'reaction') as reaction,
    runlane_test.queued_run('agent-3', 'background', 'manual') as manual,
    runlane_test.queued_run('agent-4', 'background', 'test') as test,
    runlane_test.queued_run('agent-5', 'background', 'retry') as retry,
    runlane_test.queued_run('agent-6', 'interactive', 'interactive') as chat;

select is(
    (select array_agg(run_id) from runlane.claim_runs('w', array['background'], 3)),
    (select array[manual, test, retry] from r),
    'newer interactive-class background runs are taken before older scheduled and reaction runs'
);
select is(
    (select array_agg(run_id) from runlane.claim_runs('w', array['background'], 3)),
    (select array[scheduled, reaction] from r),
    'scheduled and reaction runs come after, oldest first'
);
select is(
    (select state from runlane.runs where run_id = (select chat from r)),
    'queued',
    'a background-lane claim leaves interactive runs alone'
);
select is(
    (select array_agg(run_id) from runlane.claim_runs('w', array['interactive'], 3)),
    (select array[chat] from r),
    'the interactive lane is claimed when asked for'
);

select * from finish();
rollback;
