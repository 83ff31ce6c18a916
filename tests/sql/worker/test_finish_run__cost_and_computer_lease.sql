-- finish_run charges the cost, frees only this run's computer lease (the next waiter on
-- that computer can start), never touches a lease another run took over (that run's
-- finish is refused) and never fails because timing could not be computed.
begin;
select plan(12);

do $$
begin
    perform runlane_test.agent('agent-cost', 'org-cost', 'computer-shared');
    perform runlane_test.agent('agent-waiter', 'org-cost', 'computer-shared');
    perform runlane_test.agent('agent-elsewhere', 'org-cost', 'computer-elsewhere');
    perform runlane_test.queued_run('agent-cost', 'background', 'manual');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-cost'), 'worker-1');
    update runlane.runs set cost = 1.5 where run_id = runlane_test.last_run('agent-cost');
    perform runlane_test.queued_run('agent-waiter', 'background', 'manual');
    perform runlane_test.queued_run('agent-elsewhere', 'background', 'manual');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-elsewhere'), 'worker-2');
end
$$;

select lives_ok(
    format('select runlane.finish_run(%s, 1, ''succeeded'', null, 2.25)', runlane_test.last_run('agent-cost')),
    'finishing with a cost succeeds'
);
select is(
    (select r.cost from runlane.runs as r where r.run_id = runlane_test.last_run('agent-cost')),
    3.75::numeric,
    'the cost is added to what the run already spent'
);
select is(
    (select count(*) from runlane.computer_leases as cl where cl.computer_id = 'computer-shared'),
    0::bigint,
    'the finished run''s computer lease is released'
);
select is(
    (select count(*) from runlane.computer_leases as cl where cl.computer_id = 'computer-elsewhere'),
    1::bigint,
    'another computer''s lease is untouched'
);
select is(
    (select r.state from runlane.runs as r where r.run_id = runlane_test.last_run('agent-waiter')),
    'queued',
    'the run waiting on that computer is still queued, ready to be claimed'
);
select is(
    (
        select count(*) from runlane.run_events as e
        where e.run_id = runlane_test.last_run('agent-cost') and e.event = 'run.finished'
    ),
    1::bigint,
    'run.finished is journaled once'
);
select is(
    (
        select cl.run_id from runlane.claim_runs('worker-3', array['background']) as cl
        where cl.agent_id = 'agent-waiter'
    ),
    runlane_test.last_run('agent-waiter'),
    'the waiter on the freed computer can be claimed at once'
);

-- Only this run's lease: the computer was meanwhile leased by another run.
do $$
begin
    perform runlane_test.agent('agent-late', 'org-cost', 'computer-late');
    perform runlane_test.agent('agent-holder', 'org-cost', 'computer-late');
    perform runlane_test.queued_run('agent-late', 'background', 'manual');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-late'), 'worker-1');
    perform runlane_test.queued_run('agent-holder', 'background', 'manual');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-holder'), 'worker-2');
end
$$;
select throws_ok(
    format('select runlane.finish_run(%s, 1, ''failed'', ''timeout'', 0)', runlane_test.last_run('agent-late')),
    'RL001', null,
    'a run whose computer lease was taken over is refused like a fenced-out run'
);
select is(
    (select cl.run_id from runlane.computer_leases as cl where cl.computer_id = 'computer-late'),
    runlane_test.last_run('agent-holder'),
    'the computer lease of the run now holding the computer is kept'
);

-- A timing failure never fails the finish (run_timing replaced for this transaction).
create or replace function runlane.run_timing(p_run_id bigint) returns jsonb
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    raise exception 'timing is broken for this test' using errcode = 'XX000';
end;
$$;
do $$
begin
    perform runlane_test.agent('agent-notiming', 'org-cost', null);
    perform runlane_test.queued_run('agent-notiming', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-notiming'), 'worker-1');
end
$$;
select is(
    runlane.finish_run(runlane_test.last_run('agent-notiming'), 1, 'succeeded'),
    null,
    'finish_run returns null when timing cannot be computed'
);
select is(
    (select r.state from runlane.runs as r where r.run_id = runlane_test.last_run('agent-notiming')),
    'succeeded',
    'the run is finished although timing failed'
);
select is(
    (
        select count(*) from runlane.run_events as e
        where e.run_id = runlane_test.last_run('agent-notiming') and e.event = 'run.finished'
    ),
    1::bigint,
    'run.finished is journaled although timing failed'
);

select * from finish();
rollback;
