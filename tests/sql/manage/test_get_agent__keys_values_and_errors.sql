-- get_agent returns every key put_agent accepts with its stored value (prompt included)
-- plus next_run_at; given back to put_agent it changes nothing; RL008 for an unknown
-- agent, 22004 for a null id.
begin;
select plan(8);

do $$ begin perform runlane.put_org('org-g'); perform runlane.put_user('owner-g', 'org-g'); end $$;
do $$ begin perform runlane.put_agent('agent-g', '{"org_id": "org-g", "owner_id": "owner-g",
    "model": "m-1", "prompt": "Sum up the day", "thread_id": "t-1", "schedule": "Every 2 Hours"}'); end $$;

select set_eq(
    $$select jsonb_object_keys(runlane.get_agent('agent-g'))$$,
    $$select jsonb_object_keys(runlane._agent_patch_types()) union all select 'next_run_at'$$,
    'every key put_agent accepts, and next_run_at'
);
select ok(
    runlane.get_agent('agent-g') @> '{"org_id": "org-g", "owner_id": "owner-g", "model": "m-1", "prompt": "Sum up the day",
      "thread_id": "t-1", "computer_id": null, "schedule": "every 2 hours", "enabled": true,
      "admin_locked": false}'::jsonb,
    'each key with its stored value: the prompt as written, the schedule canonical, nulls as null'
);
select is(
    (runlane.get_agent('agent-g') ->> 'next_run_at')::timestamptz,
    (select next_run_at from runlane.agents where agent_id = 'agent-g'),
    'next_run_at is the agent''s next scheduled run'
);
create temp table before on commit drop as select runlane.get_agent('agent-g') as g;
select lives_ok(
    $$select runlane.put_agent('agent-g', (select g from before) - 'next_run_at')$$,
    'given back to put_agent (without next_run_at) it is an accepted patch'
);
select is(runlane.get_agent('agent-g'), (select g from before), 'that patch changes nothing');
do $$ begin perform runlane.put_agent('agent-g', '{"schedule": "", "model": null}'); end $$;
select is(
    runlane.get_agent('agent-g') @> '{"schedule": "", "model": null, "next_run_at": null}',
    true,
    'a manual agent without a model: empty schedule, null model, no next run'
);
select throws_ok(
    $$select runlane.get_agent('agent-zz')$$, 'RL008', 'unknown agent ''agent-zz''',
    'an unknown agent is RL008'
);
select throws_ok($$select runlane.get_agent(null)$$, '22004', null, 'a null id is 22004');

select * from finish();
rollback;
