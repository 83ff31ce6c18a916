-- A background run whose gate closed before its claim is ended by claim_runs
-- (runlane._skip_gated_runs) with the gate's reason. One that never started is skipped
-- (run.skipped journaled), the state kept for runs that never ran. One that started
-- before (a retried run that wrote output and spent its owner's budget, a run released at
-- shutdown whose agent was then locked) is closed canceled, as a finish closes it: a
-- run.finished journal row, its timing row with its outcome, its last error and outputs
-- kept, its computer free; the claim reports it with its attempt.
begin;
select plan(17);

do $$
begin
    perform runlane_test.org('org-gs', 10);
    update runlane.platform_settings set agent_weekly_budget = 10 where org_id = 'org-gs';
    perform runlane_test.agent('spender', 'org-gs');
    perform runlane_test.org('org-gl', 10);
    perform runlane_test.agent('locked', 'org-gl', 'computer-gl');
    perform runlane_test.agent('never', 'org-gl');
end
$$;

-- 1. A retried run: its first attempt wrote output, spent the whole budget and failed.
create temp table spent on commit drop as
select
    c.run_id,
    c.fence
from (select runlane_test.queued_run('spender') as run_id) as q
cross join lateral runlane.claim_runs('worker-1', array['background'], 1) as c;
do $$
begin
    perform runlane.append_output(s.run_id, s.fence, 'text', 'partial') from spent as s;
    perform runlane.charge(s.run_id, s.fence, 10) from spent as s;
end
$$;
select is(
    runlane.retry_run((select run_id from spent), (select fence from spent), 'boom', interval '0'),
    'queued', 'the failed attempt is retried'
);

create temp table claim_1 on commit drop as
select * from runlane.claim_runs('worker-2', array['background'], 5, interval '60 seconds', null, true);
select results_eq(
    'select run_id, skipped_reason, attempt from claim_1',
    format('values (%s::bigint, %L::text, 1)', (select run_id from spent), 'budget_exhausted'),
    'the claim reports the run it ended, with its attempt'
);
select results_eq(
    format('select state, reason, last_error, attempts from runlane.runs where run_id = %s', (select run_id from spent)),
    $$values ('canceled'::text, 'budget_exhausted'::text, 'boom'::text, 1::int)$$,
    'the run that ran is canceled with the gate''s reason, not skipped; its last error stays'
);
select isnt(
    (select finished_at from runlane.runs where run_id = (select run_id from spent)), null, 'it is finished'
);
select results_eq(
    format(
        $$select event, detail ->> 'outcome', detail ->> 'reason' from runlane.run_events
          where run_id = %s and event in ('run.finished', 'run.skipped')$$,
        (select run_id from spent)
    ),
    $$values ('run.finished'::text, 'canceled'::text, 'budget_exhausted'::text)$$,
    'journaled as a finish: run.finished {canceled, budget_exhausted}, no run.skipped'
);
select is(
    runlane.run_timing((select run_id from spent)) ->> 'run.outcome', 'canceled',
    'its run.finished timing row reads canceled'
);
select ok(
    runlane.run_timing((select run_id from spent)) ? 'run.execution_wall_ms',
    'with its execution figures (it started)'
);
select is(
    (select count(*) from runlane.run_outputs where run_id = (select run_id from spent)), 1::bigint,
    'its output is kept'
);
select is(
    (select state from runlane.run_status((select run_id from spent))), 'canceled',
    'a follower reading run_status learns it ended canceled'
);

-- 2. A run released at shutdown, whose agent an admin then locked.
create temp table released on commit drop as
select
    c.run_id,
    c.fence
from (select runlane_test.queued_run('locked') as run_id) as q
cross join lateral runlane.claim_runs('worker-1', array['background'], 1) as c;
select is(
    runlane.release_run((select run_id from released), (select fence from released), null, 'shutdown'),
    true, 'the run is released at shutdown'
);
update runlane.agents set admin_locked = true where agent_id = 'locked';

-- 3. A run that never started, whose agent was switched off.
create temp table never_ran on commit drop as
select runlane_test.queued_run('never') as run_id;
update runlane.agents set enabled = false where agent_id = 'never';

create temp table claim_2 on commit drop as
select * from runlane.claim_runs('worker-2', array['background'], 5, interval '60 seconds', null, true);
select set_eq(
    'select run_id, skipped_reason, attempt from claim_2',
    format(
        'values (%s::bigint, %L::text, 1), (%s, %L, 0)',
        (select run_id from released), 'agent_locked', (select run_id from never_ran), 'agent_off'
    ),
    'both are reported, nothing claimed'
);
select results_eq(
    format('select state, reason from runlane.runs where run_id = %s', (select run_id from released)),
    $$values ('canceled'::text, 'agent_locked'::text)$$,
    'the released run is canceled (agent_locked)'
);
select is(
    (
        select count(*) from runlane.run_events
        where
            run_id = (select run_id from released) and event = 'run.finished'
            and detail = '{"outcome": "canceled", "reason": "agent_locked"}'::jsonb
    ),
    1::bigint,
    'with its run.finished journal row'
);
select is(
    (select count(*) from runlane.computer_leases where computer_id = 'computer-gl'),
    0::bigint, 'its computer is free'
);
select results_eq(
    format('select state, reason, attempts from runlane.runs where run_id = %s', (select run_id from never_ran)),
    $$values ('skipped'::text, 'agent_off'::text, 0::int)$$,
    'the run that never started is still skipped'
);
select results_eq(
    format(
        $$select event, detail ->> 'reason' from runlane.run_events
          where run_id = %s and event in ('run.finished', 'run.skipped')$$,
        (select run_id from never_ran)
    ),
    $$values ('run.skipped'::text, 'agent_off'::text)$$,
    'journaled run.skipped, not run.finished'
);
select is(
    runlane.run_timing((select run_id from never_ran)) ->> 'run.outcome', 'skipped',
    'its timing reads skipped'
);

select * from finish();
rollback;
