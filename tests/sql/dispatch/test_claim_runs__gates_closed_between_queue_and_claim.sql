-- The start rule, "the run starts if" the agent is switched on, not locked by an admin, has a
-- model and its owner's weekly budget is not exhausted: checked when a claim would start
-- a background run, not only when the run was queued. A gated run is ended skipped with
-- the gate's reason and a run.skipped journal row, never claimed, and the claim takes the
-- next eligible run in its place. Interactive runs (chat) are never gated.
begin;
select plan(14);

do $$
begin
    perform runlane_test.org('org-g', 10);
    perform runlane_test.agent('g-' || i, 'org-g') from generate_series(1, 6) as i;
    perform runlane_test.org('org-spent', 10);
    perform runlane_test.agent('spent-1', 'org-spent');
    perform runlane_test.org('org-ok', 10);
    perform runlane_test.agent('ok-1', 'org-ok');
    update runlane.platform_settings set agent_weekly_budget = 10 where org_id = 'org-spent';
    update runlane.platform_settings set agent_weekly_budget = 100 where org_id = 'org-ok';
end
$$;

-- The spent owner's earlier run charged the whole budget this week.
do $$
declare
    v_run bigint := runlane_test.queued_run('spent-1');
begin
    perform runlane_test.claimed(v_run);
    perform runlane._record_charge(runlane_test.run_of(v_run), 10);
    update runlane.runs set state = 'succeeded', finished_at = now(), cost = 10 where run_id = v_run;
end
$$;

-- 1. A page of 3 in which one run's agent was locked after it was queued.
create temp table page_runs on commit drop as
select
    runlane_test.queued_run('g-' || i) as run_id,
    'g-' || i as agent_id
from generate_series(1, 4) as i;
update runlane.agents set admin_locked = true where agent_id = 'g-2';

create temp table page on commit drop as
select * from runlane.claim_runs('worker-1', array['background'], 3);

select set_eq(
    'select agent_id from page',
    array['g-1', 'g-3', 'g-4'],
    'a page of 3 with one run gated returns the other two and the next eligible run'
);
select results_eq(
    $$select state, reason, fence, attempts from runlane.runs
      where run_id = (select p.run_id from page_runs as p where p.agent_id = 'g-2')$$,
    $$values ('skipped'::text, 'agent_locked'::text, 0::bigint, 0::int)$$,
    'the locked agent''s run is skipped (agent_locked), not claimed: no fence or attempt counted'
);
select isnt(
    (
        select finished_at from runlane.runs
        where run_id = (select p.run_id from page_runs as p where p.agent_id = 'g-2')
    ),
    null,
    'the skipped run is finished'
);
select results_eq(
    $$select e.event, e.detail ->> 'reason', e.detail ->> 'trigger', e.detail ->> 'at'
      from runlane.run_events as e
      where e.run_id = (select p.run_id from page_runs as p where p.agent_id = 'g-2')$$,
    $$values ('run.skipped'::text, 'agent_locked'::text, 'manual'::text, 'claim'::text)$$,
    'the skip is journaled: one run.skipped row with its reason and trigger'
);

-- 2. Every other gate, for every background trigger, closed after the run was queued.
update runlane.runs set state = 'succeeded', finished_at = now()
where run_id in (select pg.run_id from page as pg);
create temp table gated on commit drop as
select
    runlane_test.queued_run('g-5', 'background', 'scheduled') as run_id,
    'agent_off' as reason
union all
select
    runlane_test.queued_run('g-6', 'background', 'reaction') as run_id,
    'no_model' as reason
union all
select
    runlane_test.queued_run('spent-1', 'background', 'manual') as run_id,
    'budget_exhausted' as reason;
-- g-5's run is a pending timer run of its routine (as tick left it, coalesced or fired)
update runlane.runs set
    timer_routine = 'g-5', timer_occurrence = now() - interval '1 hour',
    timer_timezone = 'UTC'
where run_id = (select g.run_id from gated as g where g.reason = 'agent_off');
update runlane.agents set enabled = false where agent_id = 'g-5';
update runlane.agents set model = null where agent_id = 'g-6';

create temp table open_runs on commit drop as
select
    runlane_test.queued_run('ok-1') as run_id,
    'background within budget' as what
union all
select
    runlane_test.queued_run('g-2', 'interactive', 'interactive') as run_id,
    'chat of the locked agent' as what
union all
select
    runlane_test.queued_run('g-5', 'interactive', 'interactive') as run_id,
    'chat of the agent switched off' as what;

create temp table second on commit drop as
select * from runlane.claim_runs('worker-1', array['interactive', 'background'], 10);

select set_eq(
    'select run_id from second',
    'select run_id from open_runs',
    'the claim returns the run within budget and the chat runs, none of the gated runs'
);
select results_eq(
    $$select r.state, r.reason from gated as g join runlane.runs as r on r.run_id = g.run_id
      where g.reason = 'agent_off'$$,
    $$values ('skipped'::text, 'agent_off'::text)$$,
    'a pending timer run of an agent switched off by its owner is skipped (agent_off)'
);
select results_eq(
    $$select r.state, r.reason from gated as g join runlane.runs as r on r.run_id = g.run_id
      where g.reason = 'no_model'$$,
    $$values ('skipped'::text, 'no_model'::text)$$,
    'a reaction run of an agent whose model was removed is skipped (no_model)'
);
select results_eq(
    $$select r.state, r.reason from gated as g join runlane.runs as r on r.run_id = g.run_id
      where g.reason = 'budget_exhausted'$$,
    $$values ('skipped'::text, 'budget_exhausted'::text)$$,
    'a manual run whose owner spent the weekly budget is skipped (budget_exhausted)'
);
select set_eq(
    $$select e.run_id, e.detail ->> 'reason' as reason, e.detail ->> 'trigger' as trigger
      from runlane.run_events as e
      where e.event = 'run.skipped' and e.run_id in (select g.run_id from gated as g)$$,
    $$select g.run_id, g.reason, r.trigger from gated as g join runlane.runs as r using (run_id)$$,
    'each gated run has its run.skipped journal row with its reason and trigger'
);
select is(
    (
        select count(*) from runlane.run_events as e
        where e.event = 'run.claimed' and e.run_id in (select g.run_id from gated as g)
    ),
    0::bigint,
    'no gated run was journaled as claimed'
);
select is(
    (select count(*) from runlane.runs where org_id = 'org-spent' and state = 'running'),
    0::bigint,
    'the spent owner has nothing running'
);

-- 3. Gates open again: new runs start (a skip does not block the agent).
update runlane.agents set enabled = true where agent_id = 'g-5';
select lives_ok(
    $$select runlane_test.queued_run('g-5')$$,
    'the skipped run left the agent free for a new run'
);
select is(
    (select agent_id from runlane.claim_runs('worker-1', array['background'], 10)),
    'g-5',
    'once switched on again, the agent''s new run is claimed'
);

-- 4. The four-argument form never returns a gated run even when it is all the queue has.
do $$ begin perform runlane_test.queued_run('g-1'); end $$;
update runlane.agents set admin_locked = true where agent_id = 'g-1';
select is(
    (select count(*) from runlane.claim_runs('worker-1', array['background'], 10)),
    0::bigint,
    'a queue of gated runs only claims nothing'
);

select * from finish();
rollback;
