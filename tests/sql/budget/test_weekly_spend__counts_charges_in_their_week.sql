-- weekly_spend counts what was charged in the owner's week, whatever week the run was
-- created in and whatever became of it: a run created last week and charged this week,
-- a failed attempt, a retried one, one reaped as stale, a canceled one and a finish's
-- cost all count; runs.cost stays each run's total.
begin;
select plan(12);

do $$
begin
    perform runlane_test.org('org-sp');
    perform runlane_test.owner('owner-sp', 'org-sp');
    perform runlane_test.agent('agent-old', 'org-sp', null, 'owner-sp');
    perform runlane_test.agent('agent-fail', 'org-sp', null, 'owner-sp');
    perform runlane_test.agent('agent-retry', 'org-sp', null, 'owner-sp');
    perform runlane_test.agent('agent-reap', 'org-sp', null, 'owner-sp');
    perform runlane_test.agent('agent-cancel', 'org-sp', null, 'owner-sp');
    perform runlane_test.agent('agent-finish', 'org-sp', null, 'owner-sp');
    perform runlane_test.agent('agent-other', 'org-sp');

    -- created last week, charged now
    perform runlane_test.queued_run('agent-old', 'background', 'manual');
    update runlane.runs set created_at = now() - interval '8 days'
    where run_id = runlane_test.last_run('agent-old');
    perform runlane_test.claimed(runlane_test.last_run('agent-old'));
    perform runlane.charge(runlane_test.last_run('agent-old'), 1, 3);

    -- a failed attempt: charged 3 x 5.0, then failed
    perform runlane_test.queued_run('agent-fail', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-fail'));
    perform runlane.charge(runlane_test.last_run('agent-fail'), 1, 5.0);
    perform runlane.charge(runlane_test.last_run('agent-fail'), 1, 5.0);
    perform runlane.charge(runlane_test.last_run('agent-fail'), 1, 5.0);
    perform runlane.finish_run(runlane_test.last_run('agent-fail'), 1, 'failed', 'boom');

    -- retried: two attempts, each charged, each failed
    perform runlane_test.queued_run('agent-retry', 'background', 'manual');
    update runlane.runs set max_attempts = 2 where run_id = runlane_test.last_run('agent-retry');
    perform runlane_test.claimed(runlane_test.last_run('agent-retry'));
    perform runlane.charge(runlane_test.last_run('agent-retry'), 1, 2);
    perform runlane.retry_run(runlane_test.last_run('agent-retry'), 1, 'boom', interval '0 seconds');
    perform runlane_test.claimed(runlane_test.last_run('agent-retry'));
    perform runlane.charge(runlane_test.last_run('agent-retry'), 2, 4);
    perform runlane.retry_run(runlane_test.last_run('agent-retry'), 2, 'boom', interval '0 seconds');

    -- reaped: its owner stopped heartbeating after a charge
    perform runlane_test.queued_run('agent-reap', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-reap'));
    perform runlane.charge(runlane_test.last_run('agent-reap'), 1, 7);
    perform runlane_test.lease_expired(runlane_test.last_run('agent-reap'));
    perform runlane.reap_stale(now());

    -- canceled after a charge
    perform runlane_test.queued_run('agent-cancel', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-cancel'));
    perform runlane.charge(runlane_test.last_run('agent-cancel'), 1, 11);
    perform runlane.finish_run(runlane_test.last_run('agent-cancel'), 1, 'canceled');

    -- a finish that passes its cost
    perform runlane_test.queued_run('agent-finish', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-finish'));
    perform runlane.finish_run(runlane_test.last_run('agent-finish'), 1, 'succeeded', null, 13);

    -- another owner's spend
    perform runlane_test.queued_run('agent-other', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-other'));
    perform runlane.charge(runlane_test.last_run('agent-other'), 1, 100);
end
$$;

select is(
    (select r.state || '/' || r.reason from runlane.runs as r where r.run_id = runlane_test.last_run('agent-retry')),
    'failed/attempts_exhausted',
    'the retried run failed once its attempts were spent'
);
select is(
    (select r.state || '/' || r.reason from runlane.runs as r where r.run_id = runlane_test.last_run('agent-reap')),
    'failed/stale',
    'the reaped run failed as stale'
);
select results_eq(
    $$select r.agent_id, r.cost from runlane.runs as r
      where r.agent_id in ('agent-old', 'agent-fail', 'agent-retry', 'agent-reap', 'agent-cancel', 'agent-finish')
      order by r.agent_id$$,
    $$values ('agent-cancel'::text, 11::numeric), ('agent-fail', 15.0), ('agent-finish', 13),
             ('agent-old', 3), ('agent-reap', 7), ('agent-retry', 6)$$,
    'runs.cost is each run''s total over all its attempts, whatever became of it'
);

select is(
    runlane.weekly_spend('owner-sp', now()),
    55.0::numeric,
    'the week counts every charge: a run created last week, failed, retried, reaped, canceled and finished'
);
select is(
    runlane.weekly_spend('owner-sp', now() - interval '7 days'),
    0::numeric,
    'the week the old run was created in counts nothing: it was charged this week'
);
select is(
    runlane.weekly_spend('owner-sp', now() + interval '7 days'),
    0::numeric,
    'next week starts from nothing'
);
select is(
    runlane.weekly_spend('owner-of-org-sp', now()),
    100::numeric,
    'another owner''s charges are theirs alone'
);

-- The ledger is the spend: a run's cost written without a charge does not count ...
update runlane.runs set cost = cost + 1000 where run_id = runlane_test.last_run('agent-old');
select is(
    runlane.weekly_spend('owner-sp', now()),
    55.0::numeric,
    'runs.cost is not what the budget reads: the ledger is'
);

-- ... and a charge stays with the owner charged, even if the agent changes hands.
update runlane.agents set owner_id = 'owner-of-org-sp' where agent_id = 'agent-finish';
select is(
    runlane.weekly_spend('owner-sp', now()),
    55.0::numeric,
    'spend stays with the owner who was charged when the agent changes hands'
);

-- The budget gate reads the same sum.
do $$ begin perform runlane_test.weekly_budget('org-sp', 55.0); end $$;
select throws_ok(
    $$select runlane.run_now('agent-old')$$,
    'RL005', null,
    'run_now refuses once the charges reach the weekly budget'
);
do $$ begin perform runlane_test.weekly_budget('org-sp', 55.01); end $$;
select is(
    (runlane.run_now('agent-fail')).state,
    'queued',
    'a budget above the charges lets the run start'
);

-- Bad arguments.
select throws_ok(
    $$select runlane.weekly_spend('owner-sp', null)$$,
    '22004', null,
    'a missing instant is refused'
);

select * from finish();
rollback;
