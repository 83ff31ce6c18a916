-- run_now (keyed): a retry with the same key returns the first row (queued or skipped,
-- prompt NULL) and creates nothing; a gate refusal stores no key, so a retry tries again.
begin;
select plan(9);

do $$ begin perform runlane_test.scheduled_agent('agent-r', 'daily at 09:00', null, 'UTC', 'org-r'); end $$;

create temporary table first_run on commit drop as
select * from runlane.run_now('agent-r', 'press-1');
select results_eq(
    $$select state, trigger, prompt from first_run$$,
    $$values ('queued'::text, 'manual'::text, null::text)$$,
    'the first keyed call queues a manual run, prompt not returned'
);
select results_eq(
    $$select run_id, state, prompt from runlane.run_now('agent-r', 'press-1')$$,
    $$select run_id, state, prompt from first_run$$,
    'the retry returns the same run'
);
select is(
    (select count(*)::int from runlane.runs where agent_id = 'agent-r'), 1,
    'the retry created nothing (not even a skipped run)'
);

-- A skipped answer is replayed as it was.
create temporary table skipped on commit drop as
select * from runlane.run_now('agent-r', 'press-2');
select results_eq(
    $$select state, reason from skipped$$,
    $$values ('skipped'::text, 'already_running'::text)$$,
    'a second key while the agent is busy gets a skipped already_running run'
);
update runlane.runs set state = 'succeeded', finished_at = now() where run_id = (select run_id from first_run);
select results_eq(
    $$select run_id, state, reason, prompt from runlane.run_now('agent-r', 'press-2')$$,
    $$select run_id, state, reason, prompt from skipped$$,
    'its retry returns the skipped row again, though the agent is free now'
);
select is(
    (select count(*)::int from runlane.runs where agent_id = 'agent-r'), 2,
    'still two runs: the first and the skipped one'
);

-- A gate refusal stores nothing: the retry tries again.
update runlane.agents set enabled = false where agent_id = 'agent-r';
select throws_ok($$select runlane.run_now('agent-r', 'press-3')$$, 'RL002', null, 'a switched-off agent refuses');
update runlane.agents set enabled = true where agent_id = 'agent-r';
select is((runlane.run_now('agent-r', 'press-3')).state, 'queued', 'the retry after the gate opened queues a run');
select is(
    (select count(*)::int from runlane.idempotency_keys where agent_id = 'agent-r'), 3,
    'one key per answered call, none for the refusal'
);

select * from finish();
rollback;
