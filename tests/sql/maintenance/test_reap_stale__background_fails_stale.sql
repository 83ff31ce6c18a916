-- reap_stale closes a background run whose lease expired as failed / stale, releasing
-- its computer and the agent: a new run of that agent can be queued and claimed.
begin;
select plan(13);

do $$
begin
    perform runlane_test.agent('agent-zombie', 'org-reap', 'computer-zombie');
    perform runlane_test.agent('agent-alive', 'org-reap', 'computer-alive');
    perform runlane_test.queued_run('agent-zombie', 'background', 'scheduled');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-zombie'), 'worker-dead');
    perform runlane_test.lease_expired(runlane_test.last_run('agent-zombie'), interval '2 minutes');
    perform runlane_test.queued_run('agent-alive', 'background', 'manual');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-alive'), 'worker-live');
end
$$;

select throws_ok(
    $$select runlane_test.queued_run('agent-zombie', 'background', 'manual')$$,
    '23505', null, 'before reaping, the zombie run locks its agent out of a new background run'
);
select results_eq(
    'select * from runlane.reap_stale()',
    $$select runlane_test.last_run('agent-zombie'), 'failed'::text, 'stale'::text$$,
    'reap_stale reports the expired background run as failed / stale'
);
select results_eq(
    $$select r.state, r.reason, r.lease_owner, r.lease_expires_at from runlane.runs as r
      where r.run_id = runlane_test.last_run('agent-zombie')$$,
    $$values ('failed'::text, 'stale'::text, null::text, null::timestamptz)$$,
    'the zombie run is failed / stale with its lease cleared'
);
select isnt(
    (select r.finished_at from runlane.runs as r where r.run_id = runlane_test.last_run('agent-zombie')),
    null,
    'the zombie run is finished'
);
select is(
    (
        select e.detail from runlane.run_events as e
        where e.run_id = runlane_test.last_run('agent-zombie') and e.event = 'run.finished'
    ),
    '{"outcome": "failed", "reason": "stale"}'::jsonb,
    'run.finished is journaled with failed / stale'
);
select is(
    (select count(*) from runlane.computer_leases as cl where cl.computer_id = 'computer-zombie'),
    0::bigint,
    'the zombie''s computer lease is released'
);
select results_eq(
    $$select r.state, r.lease_expires_at from runlane.runs as r
      where r.run_id = runlane_test.last_run('agent-alive')$$,
    $$values ('running'::text, now() + interval '60 seconds')$$,
    'a run with a live lease is not touched'
);
select is(
    (select count(*) from runlane.computer_leases as cl where cl.computer_id = 'computer-alive'),
    1::bigint,
    'a live run keeps its computer lease'
);
select is_empty(
    'select * from runlane.reap_stale()',
    'a second pass has nothing left to reap'
);
select is(
    runlane.heartbeat(runlane_test.last_run('agent-zombie'), 1),
    false,
    'the zombie''s owner learns from its heartbeat that it lost the run'
);

select lives_ok(
    $$select runlane_test.queued_run('agent-zombie', 'background', 'manual')$$,
    'after reaping, the agent can have a new background run'
);
select is(
    (select cl.run_id from runlane.claim_runs('worker-2', array['background']) as cl),
    runlane_test.last_run('agent-zombie'),
    'the agent''s new run is claimed (on its freed computer)'
);
select throws_ok(
    format(
        'select runlane.finish_run(%s, 1, ''succeeded'')',
        (select min(r.run_id) from runlane.runs as r where r.agent_id = 'agent-zombie')
    ),
    'RL001', null, 'the zombie''s owner cannot finish the reaped run'
);

select * from finish();
rollback;
