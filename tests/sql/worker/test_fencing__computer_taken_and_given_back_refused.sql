-- A paused run whose computer another run took over AND has since given back (its lease
-- row is gone) still lost the computer: only the run itself, reap_stale and a later owner
-- delete lease rows, so a running run without its row cannot prove it holds the computer.
-- Its writes are refused (RL001) and its heartbeat answers false.
begin;
select plan(4);

do $$
begin
    perform runlane_test.agent('agent-slow', 'org-gone', 'computer-gone');
    perform runlane_test.agent('agent-next', 'org-gone', 'computer-gone');
    perform runlane_test.queued_run('agent-slow', 'background', 'manual');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-slow'), 'worker-old');
    perform runlane_test.lease_expired(runlane_test.last_run('agent-slow'));
    perform runlane_test.queued_run('agent-next', 'background', 'manual');
end
$$;
create temp table next_claim on commit drop as
select * from runlane.claim_runs('worker-new', array['background']);
do $$
begin
    perform runlane.finish_run((select run_id from next_claim), (select fence from next_claim), 'succeeded');
end
$$;

select is_empty(
    $$select 1 from runlane.computer_leases where computer_id = 'computer-gone'$$,
    'the other run finished and freed the computer'
);
select is(
    runlane.heartbeat(runlane_test.last_run('agent-slow'), 1),
    false,
    'the paused run''s heartbeat answers false'
);
select throws_ok(
    format('select runlane.append_output(%s, 1, ''text'', ''stale'')', runlane_test.last_run('agent-slow')),
    'RL001', null, 'its append_output is refused'
);
select throws_ok(
    format('select runlane.finish_run(%s, 1, ''succeeded'')', runlane_test.last_run('agent-slow')),
    'RL001', null, 'its finish is refused'
);

select * from finish();
rollback;
