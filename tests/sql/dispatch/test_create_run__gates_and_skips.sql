-- create_run: the same gates as run_now; overlap and budget become skipped rows; a
-- queued run keeps its prompt and wake time and is never marked as a timer run.
begin;
select plan(13);

do $$ begin perform runlane_test.scheduled_agent('agent-c', '', null, 'UTC', 'org-c'); end $$;

update runlane.agents set enabled = false where agent_id = 'agent-c';
select throws_ok(
    $$select runlane.create_run('agent-c', 'scheduled')$$, 'RL002', null, 'a switched-off agent raises RL002'
);
update runlane.agents set enabled = true, admin_locked = true where agent_id = 'agent-c';
select throws_ok(
    $$select runlane.create_run('agent-c', 'scheduled')$$, 'RL003', null, 'an admin-locked agent raises RL003'
);
update runlane.agents set admin_locked = false, model = null where agent_id = 'agent-c';
select throws_ok(
    $$select runlane.create_run('agent-c', 'reaction')$$, 'RL004', null, 'an agent without a model raises RL004'
);
update runlane.agents set model = 'test-model' where agent_id = 'agent-c';
select throws_ok(
    $$select runlane.create_run('agent-none', 'scheduled')$$, 'RL008', null, 'an unknown agent raises RL008'
);
select throws_ok(
    $$select runlane.create_run('agent-c', 'interactive')$$, '22023', null,
    'an interactive trigger is not a background run''s'
);
select is(runlane_test.row_count('runs'), 0::bigint, 'refused calls wrote no run');

select results_eq(
    $$
    select r.lane, r.trigger, r.state, r.prompt, r.wake_at, r.timer_routine, r.timer_occurrence
    from runlane_test.run_of(
        runlane.create_run('agent-c', 'scheduled', 'One-shot reminder', now() + interval '300 days')
    ) as r
    $$,
    $$
    values (
        'background'::text, 'scheduled'::text, 'queued'::text, 'One-shot reminder'::text,
        now() + interval '300 days', null::text, null::timestamptz
    )
    $$,
    'a deferred one-shot run is queued with its prompt and wake time and no timer marker'
);

select is(
    (runlane_test.run_of(runlane.create_run('agent-c', 'reaction'))).reason,
    'already_running',
    'an agent with an unfinished run gets a skipped run (already_running)'
);

update runlane.runs set state = 'succeeded', finished_at = now(), cost = 3
where agent_id = 'agent-c' and state = 'queued';
-- ... and charged now, as runlane.charge or finish_run would have (the ledger is the spend).
do $$
begin
    perform runlane._record_charge(
        runlane_test.run_of((select r.run_id from runlane.runs as r where r.agent_id = 'agent-c' and r.cost = 3)), 3
    );
end
$$;
do $$ begin perform runlane_test.weekly_budget('org-c', 3); end $$;
select is(
    (runlane_test.run_of(runlane.create_run('agent-c', 'scheduled'))).reason,
    'budget_exhausted',
    'an owner whose budget is spent gets a skipped run (budget_exhausted)'
);
select is(
    (
        select count(*)::int
        from runlane.run_events as e
        inner join runlane.runs as r on e.org_id = r.org_id and e.run_id = r.run_id
        where r.agent_id = 'agent-c' and e.event = 'run.skipped' and r.state = 'skipped'
    ),
    2,
    'each skipped run is journaled'
);

do $$ begin perform runlane_test.weekly_budget('org-c', null); end $$;
select is(
    (runlane_test.run_of(runlane.create_run('agent-c', 'test'))).prompt,
    'Summarize the day',
    'without a prompt the run takes the agent''s prompt'
);

-- a pending timer run of the agent is never merged with a create_run run
update runlane.runs set state = 'canceled', finished_at = now()
where agent_id = 'agent-c' and state = 'queued';
update runlane.agents set schedule = 'daily at 09:00' where agent_id = 'agent-c';
do $$ begin perform runlane_test.due('agent-c', '2026-05-01 09:00+00'); end $$;
select is(
    (runlane_test.run_of(runlane.create_run('agent-c', 'retry'))).trigger,
    'retry',
    'an explicit retry is created as its own run'
);
select is(
    (select t.event from runlane.tick('2026-05-01 09:00+00') as t where t.agent_id = 'agent-c'),
    'run.skipped',
    'tick does not coalesce into a run create_run made: it skips'
);

select * from finish();
rollback;
