-- tick: the four outcomes in order (coalesce, already_running, budget_exhausted, fire),
-- next_run_at always past p_now, missed slots never piling up, gated agents left alone.
begin;
select plan(23);

do $$ begin perform runlane_test.scheduled_agent('agent-k', 'daily at 09:00', null, 'UTC', 'org-k'); end $$;
do $$ begin perform runlane_test.due('agent-k', '2026-05-01 09:00+00'); end $$;

create temporary table ev on commit drop as
select
    1 as pass,
    t.*
from runlane.tick('2026-05-03 10:00+00') as t;

-- 4. fire: one run for the most recent occurrence, however many slots were missed
select results_eq(
    $$select event, agent_id, occurrence from ev where pass = 1$$,
    $$values ('routine.fired'::text, 'agent-k'::text, '2026-05-03 09:00+00'::timestamptz)$$,
    'a due agent fires once, for the most recent occurrence: missed slots do not pile up'
);
select results_eq(
    $$
    select r.lane, r.trigger, r.state, r.timer_routine, r.timer_occurrence, r.timer_timezone
    from runlane.runs as r inner join ev on r.run_id = ev.run_id
    $$,
    $$values ('background'::text, 'scheduled'::text, 'queued'::text, 'agent-k'::text,
              '2026-05-03 09:00+00'::timestamptz, 'UTC'::text)$$,
    'the fired run is a queued background timer run marked with routine, occurrence and zone'
);
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-k'), '2026-05-04 09:00+00'::timestamptz,
    'next_run_at advances to the first slot after p_now'
);
select is(
    (select e.event from runlane.run_events as e inner join ev on e.run_id = ev.run_id),
    'routine.fired',
    'the firing is journaled'
);
select is(
    (select count(*)::int from runlane.tick('2026-05-03 10:00+00')), 0,
    'an agent whose slot is not due yet takes no part in tick'
);

-- 1. coalesce: the pending pristine timer run takes the new occurrence, keeps its wake time
update runlane.runs set wake_at = '2026-05-04 09:40+00' where agent_id = 'agent-k';
insert into ev
select
    2 as pass,
    t.*
from runlane.tick('2026-05-04 09:30+00') as t;
select results_eq(
    $$select ev.event, ev.run_id, ev.occurrence from ev where pass = 2$$,
    $$select 'routine.coalesced'::text, ev.run_id, '2026-05-04 09:00+00'::timestamptz from ev where pass = 1$$,
    'a pending pristine timer run is reused for the new occurrence'
);
select results_eq(
    $$select r.timer_occurrence, r.wake_at, r.state from runlane.runs as r where r.agent_id = 'agent-k'$$,
    $$values ('2026-05-04 09:00+00'::timestamptz, '2026-05-04 09:40+00'::timestamptz, 'queued'::text)$$,
    'coalescing moves the marker to the occurrence and keeps the computer retry delay'
);
select is(
    (select count(*)::int from runlane.runs where agent_id = 'agent-k'), 1,
    'coalescing creates no run'
);
select results_eq(
    $$
    select e.event from runlane.run_events as e
    inner join runlane.runs as r on e.org_id = r.org_id and e.run_id = r.run_id
    where r.agent_id = 'agent-k' order by e.event_id
    $$,
    $$values ('routine.fired'::text), ('routine.coalesced'::text)$$,
    'a coalesced occurrence is journaled as routine.coalesced and never also as routine.fired'
);
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-k'), '2026-05-05 09:00+00'::timestamptz,
    'after coalescing next_run_at advances too'
);

-- 2. overlap: a started run makes the slot a visible skip
select runlane_test.claimed(run_id)::text from runlane.runs where agent_id = 'agent-k';
insert into ev
select
    3 as pass,
    t.*
from runlane.tick('2026-05-05 09:00+00') as t;
select results_eq(
    $$
    select ev.event, r.state, r.reason, r.timer_occurrence
    from ev inner join runlane.runs as r on ev.run_id = r.run_id where ev.pass = 3
    $$,
    $$values ('run.skipped'::text, 'skipped'::text, 'already_running'::text, '2026-05-05 09:00+00'::timestamptz)$$,
    'a slot due while a run is running writes a skipped run with reason already_running'
);
select is(
    (select e.detail ->> 'reason' from runlane.run_events as e inner join ev on e.run_id = ev.run_id where ev.pass = 3),
    'already_running',
    'the overlap skip is visible in the journal'
);

-- 3. budget: a free agent whose owner spent the week's budget
do $$ begin perform runlane_test.scheduled_agent('agent-b', 'daily at 09:00', null, 'UTC', 'org-kb'); end $$;
do $$ begin perform runlane_test.spent('agent-b', 5, '2026-05-04 12:00+00'); end $$;
do $$ begin perform runlane_test.weekly_budget('org-kb', 5); end $$;
do $$ begin perform runlane_test.due('agent-b', '2026-05-05 09:00+00'); end $$;
insert into ev
select
    4 as pass,
    t.*
from runlane.tick('2026-05-05 09:00+00') as t;
select results_eq(
    $$
    select ev.event, r.state, r.reason
    from ev inner join runlane.runs as r on ev.run_id = r.run_id where ev.pass = 4
    $$,
    $$values ('run.skipped'::text, 'skipped'::text, 'budget_exhausted'::text)$$,
    'an exhausted weekly budget writes a skipped run with reason budget_exhausted'
);
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-b'), '2026-05-06 09:00+00'::timestamptz,
    'after a skip next_run_at advances too'
);

-- gates: a switched-off, locked or model-less agent takes no part even when forced due
do $$ begin perform runlane_test.scheduled_agent('agent-off', 'daily at 09:00', null, 'UTC', 'org-k'); end $$;
do $$ begin perform runlane_test.scheduled_agent('agent-lock', 'daily at 09:00', null, 'UTC', 'org-k'); end $$;
do $$ begin perform runlane_test.scheduled_agent('agent-nomodel', 'daily at 09:00', null, 'UTC', 'org-k'); end $$;
update runlane.agents set enabled = false where agent_id = 'agent-off';
update runlane.agents set admin_locked = true where agent_id = 'agent-lock';
update runlane.agents set model = null where agent_id = 'agent-nomodel';
select is(
    (
        select count(*)::int from runlane.agents
        where agent_id in ('agent-off', 'agent-lock', 'agent-nomodel') and next_run_at is null
    ),
    3,
    'closed gates cleared next_run_at'
);
select runlane_test.due(a, '2026-05-05 09:00+00') from unnest(array['agent-off', 'agent-lock', 'agent-nomodel']) as a;
select is(
    (select count(*)::int from runlane.tick('2026-05-06 00:00+00') as t where t.agent_id <> 'agent-b'),
    0,
    'a gated agent takes no part in tick even with a stale next_run_at'
);

-- pristine means pristine: each kind of trace on the pending run prevents coalescing
select runlane_test.scheduled_agent(v.agent_id, 'daily at 09:00', null, 'UTC', 'org-kp')
from unnest(array['agent-v0', 'agent-v1', 'agent-v2', 'agent-v3', 'agent-v4', 'agent-v5', 'agent-v6']) as v (agent_id);
select runlane_test.due(agent_id, '2026-06-01 09:00+00') from runlane.agents where org_id = 'org-kp';
select count(*)::text from runlane.tick('2026-06-01 09:00+00');
update runlane.agents set prompt = 'Another prompt' where agent_id = 'agent-v1';
update runlane.runs set checkpoint = '{"step": 1}' where agent_id = 'agent-v2';
insert into runlane.run_outputs (org_id, run_id, attempt, kind, body)
select
    org_id,
    run_id,
    0 as attempt,
    'progress' as kind,
    'warming up' as body
from runlane.runs where agent_id = 'agent-v3';
insert into runlane.messages (org_id, agent_id, thread_id, body, run_id)
select
    org_id,
    agent_id,
    'thread-v4' as thread_id,
    'also check the logs' as body,
    run_id
from runlane.runs where agent_id = 'agent-v4';
update runlane.runs set computer_id = 'pc-v5' where agent_id = 'agent-v5';
insert into runlane.computer_leases (org_id, computer_id, run_id, fence, expires_at)
select
    org_id,
    'pc-v5' as computer_id,
    run_id,
    0 as fence,
    now() + interval '1 minute' as expires_at
from runlane.runs where agent_id = 'agent-v5';
update runlane.agents set model = 'other-model' where agent_id = 'agent-v6';
insert into ev
select
    5 as pass,
    t.*
from runlane.tick('2026-06-02 09:00+00') as t;
select is(
    (select event from ev where pass = 5 and agent_id = 'agent-v0'), 'routine.coalesced',
    'an untouched pending timer run is coalesced'
);
select results_eq(
    $$select ev.agent_id, ev.event from ev where ev.pass = 5 and ev.agent_id like 'agent-v_' and ev.agent_id <> 'agent-v0' order by 1$$,
    $$values ('agent-v1'::text, 'run.skipped'::text), ('agent-v2', 'run.skipped'), ('agent-v3', 'run.skipped'),
             ('agent-v4', 'run.skipped'), ('agent-v5', 'run.skipped'), ('agent-v6', 'run.skipped')$$,
    'another prompt or model, a checkpoint, output, steering or a live computer lease each prevent coalescing'
);
select is(
    (select count(*)::int from ev where pass = 5 and event = 'routine.fired' and agent_id like 'agent-v_'), 0,
    'nothing fired while those runs wait'
);

-- intervals: exact hours on the anchored grid, next_run_at past p_now
do $$ begin perform runlane_test.scheduled_agent('agent-i', 'every 5 hours', null, 'UTC', 'org-ki'); end $$;
update runlane.agents set schedule_anchor = '2026-03-29 00:00+00', next_run_at = '2026-03-29 05:00+00'
where agent_id = 'agent-i';
insert into ev
select
    6 as pass,
    t.*
from runlane.tick('2026-03-29 12:34+00') as t;
select is(
    (select occurrence from ev where pass = 6), '2026-03-29 10:00+00'::timestamptz,
    'an interval routine fires for the latest grid slot due'
);
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-i'), '2026-03-29 15:00+00'::timestamptz,
    'an interval routine''s next_run_at is the next grid slot after p_now'
);

select throws_ok($$select * from runlane.tick(now(), -1)$$, '22023', null, 'a negative limit is refused');
select is(
    (select count(*)::int from runlane.tick('2030-01-01 00:00+00', 2)), 2,
    'tick handles at most p_limit agents'
);

select * from finish();
rollback;
