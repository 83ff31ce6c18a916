-- run_now honours the gates: each closed gate raises its own code with a clear message
-- and writes no row (no run, no journal entry).
begin;
select plan(12);

do $$ begin perform runlane_test.scheduled_agent('agent-g', '', null, 'UTC', 'org-g'); end $$;

select throws_ok($$select runlane.run_now('agent-nobody')$$, 'RL008', null, 'an unknown agent raises RL008');

update runlane.agents set enabled = false where agent_id = 'agent-g';
select throws_ok(
    $$select runlane.run_now('agent-g')$$, 'RL002', 'agent agent-g is switched off by its owner',
    'an agent switched off by its owner raises RL002'
);
update runlane.agents set enabled = true, admin_locked = true where agent_id = 'agent-g';
select throws_ok(
    $$select runlane.run_now('agent-g')$$, 'RL003', 'agent agent-g is locked by an administrator',
    'an admin-locked agent raises RL003'
);
update runlane.agents set admin_locked = false, model = null where agent_id = 'agent-g';
select throws_ok(
    $$select runlane.run_now('agent-g')$$, 'RL004', 'agent agent-g has no model',
    'an agent without a model raises RL004'
);
update runlane.agents set model = 'test-model' where agent_id = 'agent-g';

do $$ begin perform runlane_test.weekly_budget('org-g', 10); end $$;
do $$ begin perform runlane_test.spent('agent-g', 10); end $$;
select throws_ok(
    $$select runlane.run_now('agent-g')$$, 'RL005',
    'the weekly agent budget of the owner of agent agent-g is exhausted',
    'an owner whose weekly budget is spent gets RL005'
);
select is(runlane_test.row_count('runs'), 1::bigint, 'closed gates wrote no run (only the spent fixture run exists)');
select is(runlane_test.row_count('run_events'), 0::bigint, 'closed gates wrote no journal row');

do $$ begin perform runlane_test.weekly_budget('org-g', 10.01); end $$;
select is((runlane.run_now('agent-g')).state, 'queued', 'a budget not yet reached lets the run start');

do $$ begin perform runlane_test.weekly_budget('org-g', null); end $$;
select lives_ok(
    $$update runlane.runs set state = 'succeeded', finished_at = now() where agent_id = 'agent-g'$$,
    'the run finishes'
);
select is((runlane.run_now('agent-g')).state, 'queued', 'a null budget is unlimited');

select matches(
    runlane_test.error_hint(
        $$update runlane.platform_settings set agent_weekly_budget = 0 where org_id = 'org-g';
          select runlane.run_now('agent-g')$$
    ),
    'Monday 00:00',
    'RL005 hints when the budget renews'
);
select matches(
    runlane_test.error_hint(
        $$update runlane.agents set admin_locked = true where agent_id = 'agent-g';
          select runlane.run_now('agent-g')$$
    ),
    'administrator',
    'RL003 hints that only an administrator can unlock the agent'
);

select * from finish();
rollback;
