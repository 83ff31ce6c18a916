-- agent_page: a page of agents in agent_id order from p_from (a keyset page), filtered by
-- text (agent, organization, schedule; any case) and status, each row saying what
-- agent_schedules and agent_last_runs say of the agent; the page size and the status
-- are checked.
begin;
select plan(10);

do $$
begin
    perform runlane_test.scheduled_agent('pg-timer', 'daily at 09:00', 'Europe/Berlin', 'UTC', 'org-Page');
    perform runlane_test.agent('pg-a' || g, 'org-page-2') from generate_series(1, 5) as g;
    perform runlane_test.agent('pg-off', 'org-page-2');
    perform runlane_test.agent('pg-locked', 'org-page-2');
    perform runlane_test.agent('pg-nomodel', 'org-page-2');
    update runlane.agents set enabled = false where agent_id = 'pg-off';
    update runlane.agents set admin_locked = true where agent_id = 'pg-locked';
    update runlane.agents set model = null where agent_id = 'pg-nomodel';
    perform runlane_test.timed_run('pg-a1', 'interactive', 'interactive', 'succeeded', now() - interval '1 hour', 10, 20, 30);
    perform runlane_test.timed_run('pg-a1', 'interactive', 'interactive', 'queued', now() - interval '1 minute');
    perform runlane_test.timed_run('pg-timer', 'background', 'scheduled', 'skipped', now() - interval '5 minutes',
                                   null, null, 0, 'already_running');
end
$$;

select results_eq(
    $$select agent_id from runlane.agent_page(p_limit => 3)$$,
    $$values ('pg-a1'), ('pg-a2'), ('pg-a3')$$,
    'the first page: the first agents in agent_id order'
);
select results_eq(
    $$select agent_id from runlane.agent_page(p_from => 'pg-a4', p_limit => 3)$$,
    $$values ('pg-a4'), ('pg-a5'), ('pg-locked')$$,
    'a later page starts at p_from'
);
select results_eq(
    $$select agent_id from runlane.agent_page(p_from => 'pg-o', p_limit => 100)$$,
    $$values ('pg-off'), ('pg-timer')$$,
    'p_from need not be an agent: the page starts at the first agent after it'
);
select results_eq(
    $$select agent_id from runlane.agent_page(p_match => 'PAGE-2', p_limit => 2)$$,
    $$values ('pg-a1'), ('pg-a2')$$,
    'the text filter matches the organization, whatever the case, before the page is cut'
);
select results_eq(
    $$select agent_id from runlane.agent_page(p_match => 'daily')$$,
    $$values ('pg-timer')$$,
    'the text filter matches the schedule'
);
select results_eq(
    $$select agent_id, status from runlane.agent_page(p_status => 'off')
      union all
      select agent_id, status from runlane.agent_page(p_status => 'locked')
      union all
      select agent_id, status from runlane.agent_page(p_status => 'no_model')$$,
    $$values ('pg-off', 'off'), ('pg-locked', 'locked'), ('pg-nomodel', 'no_model')$$,
    'the status filter'
);
select set_eq(
    $$select agent_id, org_id, schedule, timezone, status, next_run_at, next_run_local
      from runlane.agent_page()$$,
    $$select agent_id, org_id, schedule, timezone, status, next_run_at, next_run_local
      from runlane.agent_schedules()$$,
    'each agent as agent_schedules shows it (timezone, status, next run in local time)'
);
select set_eq(
    $$select agent_id, last_run_id, last_created_at, last_lane, last_trigger, last_state, last_reason
      from runlane.agent_page() where last_run_id is not null$$,
    $$select agent_id, run_id, created_at, lane, trigger, state, reason
      from runlane.agent_last_runs()$$,
    'each agent''s newest run as agent_last_runs shows it (none without runs)'
);
select throws_ok(
    $$select * from runlane.agent_page(p_limit => 0)$$,
    '22023', null, 'a page holds at least one agent'
);
select throws_ok(
    $$select * from runlane.agent_page(p_status => 'sleeping')$$,
    '22023', null, 'an unknown status is refused'
);

select * from finish();
rollback;
