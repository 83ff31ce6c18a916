-- finish_run validates its arguments (22004 / 22023) before touching the run, refuses
-- an unknown run with RL008 and a caller that no longer owns the run with RL001.
begin;
select plan(11);

do $$
begin
    perform runlane_test.agent('agent-arg', 'org-arg', 'computer-arg');
    perform runlane_test.queued_run('agent-arg', 'background', 'manual');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-arg'), 'worker-1');
end
$$;

select throws_ok(
    format('select runlane.finish_run(%s, 1, ''done'')', runlane_test.last_run('agent-arg')),
    '22023', null, 'an unknown outcome is refused with 22023'
);
select throws_ok(
    format('select runlane.finish_run(%s, 1, ''skipped'')', runlane_test.last_run('agent-arg')),
    '22023', null, 'skipped is not an outcome a worker reports'
);
select throws_ok(
    format('select runlane.finish_run(%s, 1, null)', runlane_test.last_run('agent-arg')),
    '22004', null, 'a null outcome is refused with 22004'
);
select throws_ok(
    format('select runlane.finish_run(%s, 1, ''succeeded'', null, -0.01)', runlane_test.last_run('agent-arg')),
    '22023', null, 'a negative cost is refused with 22023'
);
select throws_ok(
    format('select runlane.finish_run(%s, 1, ''succeeded'', null, null)', runlane_test.last_run('agent-arg')),
    '22004', null, 'a null cost is refused with 22004'
);
select throws_ok(
    'select runlane.finish_run(-1, 1, ''succeeded'')',
    'RL008', null, 'an unknown run is refused with RL008'
);
select throws_ok(
    format('select runlane.finish_run(%s, 2, ''succeeded'')', runlane_test.last_run('agent-arg')),
    'RL001', null, 'a caller holding another fence is refused with RL001'
);
select results_eq(
    $$select r.state, r.cost from runlane.runs as r where r.run_id = runlane_test.last_run('agent-arg')$$,
    $$values ('running'::text, 0::numeric)$$,
    'refused finishes leave the run running and uncharged'
);
select is(
    (select count(*) from runlane.computer_leases as cl where cl.computer_id = 'computer-arg'),
    1::bigint,
    'refused finishes keep the computer lease'
);

-- The run is reaped and claimed again: the first owner's finish is refused.
do $$
begin
    perform runlane_test.lease_expired(runlane_test.last_run('agent-arg'));
    perform runlane.reap_stale();
end
$$;
select throws_ok(
    format('select runlane.finish_run(%s, 1, ''succeeded'')', runlane_test.last_run('agent-arg')),
    'RL001', null, 'the owner of a reaped run is refused with RL001'
);
select is(
    (
        select count(*) from runlane.run_events as e
        where e.run_id = runlane_test.last_run('agent-arg') and e.event = 'run.finished'
    ),
    1::bigint,
    'only the reaper journaled run.finished'
);

select * from finish();
rollback;
