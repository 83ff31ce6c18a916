-- agents.next_run_at is kept by the agents trigger: set when a schedule is set or a gate
-- opens, cleared without a journal row when a gate closes, the schedule stored canonical.
begin;
select plan(16);

do $$ begin perform runlane_test.scheduled_agent('agent-t', 'Daily at 9:00'); end $$;

select is(
    (select schedule from runlane.agents where agent_id = 'agent-t'),
    'daily at 09:00',
    'an accepted non-canonical schedule is stored as its canonical text'
);
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-t'),
    runlane.next_slot('daily at 09:00', 'UTC', now()),
    'setting a schedule sets next_run_at to the first slot after now'
);

update runlane.agents set enabled = false where agent_id = 'agent-t';
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-t'), null,
    'switching the agent off clears next_run_at'
);
update runlane.agents set enabled = true where agent_id = 'agent-t';
select isnt(
    (select next_run_at from runlane.agents where agent_id = 'agent-t'), null,
    'switching it on again sets next_run_at'
);

update runlane.agents set admin_locked = true where agent_id = 'agent-t';
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-t'), null,
    'an admin lock clears next_run_at'
);
update runlane.agents set admin_locked = false where agent_id = 'agent-t';

update runlane.agents set model = null where agent_id = 'agent-t';
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-t'), null,
    'an agent without a model has no next_run_at'
);
update runlane.agents set model = 'test-model' where agent_id = 'agent-t';
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-t'),
    runlane.next_slot('daily at 09:00', 'UTC', now()),
    'giving it a model again sets next_run_at from the schedule'
);

select is(
    (select count(*)::int from runlane.run_events), 0,
    'closing and opening gates leaves no journal row'
);

update runlane.agents set schedule = '' where agent_id = 'agent-t';
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-t'), null,
    'an empty schedule makes the agent manual-only: no next_run_at'
);

update runlane.agents set schedule = 'every 6 hours' where agent_id = 'agent-t';
select is(
    (select schedule_anchor from runlane.agents where agent_id = 'agent-t'), now(),
    'setting an interval schedule anchors its grid at now'
);
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-t'), now() + interval '6 hours',
    'an interval schedule first fires N hours after it was set'
);

-- the pending slot is kept by writes that change nothing relevant
do $$ begin perform runlane_test.due('agent-t', '2026-01-01 00:00+00'); end $$;
update runlane.agents set prompt = 'Something else', schedule = 'Every 6 hours' where agent_id = 'agent-t';
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-t'), '2026-01-01 00:00+00'::timestamptz,
    'rewriting the same schedule in another spelling keeps the pending slot'
);
update runlane.agents set enabled = true where agent_id = 'agent-t';
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-t'), '2026-01-01 00:00+00'::timestamptz,
    'writing an already open gate keeps the pending slot'
);

update runlane.agents set next_run_at = '2000-01-01 00:00+00', enabled = false where agent_id = 'agent-t';
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-t'), null,
    'a caller cannot set next_run_at on a switched-off agent'
);

insert into runlane.agents (agent_id, org_id, owner_id, model, schedule, next_run_at)
values ('agent-ins', 'org-sched', 'owner-of-agent-t', 'm', 'weekly on Mon at 10:00', '2000-01-01 00:00+00');
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-ins'),
    runlane.next_slot('weekly on mon at 10:00', 'UTC', now()),
    'an inserted agent gets next_run_at from its schedule, whatever the caller wrote'
);
insert into runlane.agents (agent_id, org_id, owner_id, model, schedule, enabled)
values ('agent-off', 'org-sched', 'owner-of-agent-t', 'm', 'daily at 10:00', false);
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-off'), null,
    'an agent inserted switched off has no next_run_at'
);

select * from finish();
rollback;
