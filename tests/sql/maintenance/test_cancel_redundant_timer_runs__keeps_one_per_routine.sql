-- cancel_redundant_timer_runs: bounded; keeps one pristine marked timer run per routine,
-- prompt, thread and model; cancels the rest with reason redundant; never touches runs
-- with attempts, a checkpoint or a live computer lease, unmarked older firings, manual
-- runs, tests, retries or reactions; rows and terminal events stay.
-- Surplus timer runs can only exist before the contract step (0003), so this test
-- drops 0003's one-unfinished-run index inside its own transaction.
begin;
select plan(11);

drop index runlane.runs_one_unfinished_background_run_per_agent;

do $$ begin perform runlane_test.scheduled_agent('agent-x', 'daily at 09:00', null, 'UTC', 'org-x'); end $$;

create temporary table planted (label text, run_id bigint) on commit drop;
with made as (
    insert into runlane.runs as r (
        org_id, agent_id, lane, trigger, prompt, model, timer_routine, timer_occurrence,
        timer_timezone, attempts, checkpoint, computer_id
    )
    select
        'org-x' as org_id,
        'agent-x' as agent_id,
        'background' as lane,
        p.trigger,
        p.prompt,
        'test-model' as model,
        p.routine,
        p.occurrence::timestamptz,
        'UTC' as timer_timezone,
        p.attempts,
        p.checkpoint::jsonb,
        p.computer_id
    from (
        values
        ('oldest', 'scheduled', 'Summarize the day', 'agent-x', '2026-05-01 09:00+00', 0, null, null),
        ('older', 'scheduled', 'Summarize the day', 'agent-x', '2026-05-02 09:00+00', 0, null, null),
        ('latest', 'scheduled', 'Summarize the day', 'agent-x', '2026-05-03 09:00+00', 0, null, null),
        ('attempted', 'scheduled', 'Summarize the day', 'agent-x', '2026-04-30 09:00+00', 1, null, null),
        ('checkpointed', 'scheduled', 'Summarize the day', 'agent-x', '2026-04-29 09:00+00', 0, '{"s": 1}', null),
        ('leased', 'scheduled', 'Summarize the day', 'agent-x', '2026-04-28 09:00+00', 0, null, 'pc-x'),
        ('other-prompt', 'scheduled', 'Another prompt', 'agent-x', '2026-04-27 09:00+00', 0, null, null),
        ('unmarked', 'scheduled', 'Summarize the day', null, null, 0, null, null),
        ('manual', 'manual', 'Summarize the day', null, null, 0, null, null),
        ('test', 'test', 'Summarize the day', null, null, 0, null, null),
        ('retry', 'retry', 'Summarize the day', null, null, 0, null, null),
        ('reaction', 'reaction', 'Summarize the day', null, null, 0, null, null)
    ) as p (label, trigger, prompt, routine, occurrence, attempts, checkpoint, computer_id)
    order by p.label
    returning r.run_id, r.trigger, r.timer_occurrence, r.prompt, r.attempts, r.checkpoint, r.computer_id
)

insert into planted (label, run_id)
select
    case
        when m.computer_id is not null then 'leased'
        when m.checkpoint is not null then 'checkpointed'
        when m.attempts > 0 then 'attempted'
        when m.prompt <> 'Summarize the day' then 'other-prompt'
        when m.timer_occurrence = '2026-05-01 09:00+00' then 'oldest'
        when m.timer_occurrence = '2026-05-02 09:00+00' then 'older'
        when m.timer_occurrence = '2026-05-03 09:00+00' then 'latest'
        when m.trigger = 'scheduled' then 'unmarked'
        else m.trigger
    end as label,
    m.run_id
from made as m;

insert into runlane.computer_leases (computer_id, run_id, fence, expires_at)
select
    'pc-x' as computer_id,
    p.run_id,
    0 as fence,
    now() + interval '1 minute' as expires_at
from planted as p where p.label = 'leased';

select is(runlane.cancel_redundant_timer_runs(1), 1, 'a pass cancels at most p_limit runs');
select is(runlane.cancel_redundant_timer_runs(100), 1, 'the next pass cancels the remaining surplus run');
select is(runlane.cancel_redundant_timer_runs(100), 0, 'once one run per routine is left there is nothing to cancel');

select results_eq(
    $$
    select p.label, r.state, r.reason
    from planted as p inner join runlane.runs as r on p.run_id = r.run_id
    where r.state = 'canceled' order by p.label
    $$,
    $$values ('older'::text, 'canceled'::text, 'redundant'::text), ('oldest', 'canceled', 'redundant')$$,
    'the older pristine timer runs of the routine are cancelled with reason redundant'
);
select is(
    (select r.state from planted as p inner join runlane.runs as r on p.run_id = r.run_id where p.label = 'latest'),
    'queued',
    'the pending run with the latest occurrence is kept'
);
select is(
    (
        select count(*)::int from planted as p inner join runlane.runs as r on p.run_id = r.run_id
        where p.label in ('attempted', 'checkpointed', 'leased') and r.state = 'queued'
    ),
    3,
    'runs with attempts, a checkpoint or a live computer lease are never cancelled'
);
select is(
    (
        select count(*)::int from planted as p inner join runlane.runs as r on p.run_id = r.run_id
        where p.label in ('unmarked', 'manual', 'test', 'retry', 'reaction') and r.state = 'queued'
    ),
    5,
    'unmarked older firings, manual runs, tests, retries and reactions are never cancelled'
);
select is(
    (select r.state from planted as p inner join runlane.runs as r on p.run_id = r.run_id where p.label = 'other-prompt'),
    'queued',
    'a timer run with another prompt is its own group and is kept'
);
select is(
    (select count(*)::int from runlane.runs where agent_id = 'agent-x'), 12,
    'cancelled rows stay'
);
select results_eq(
    $$
    select e.event, e.detail ->> 'reason'
    from runlane.run_events as e inner join runlane.runs as r on e.run_id = r.run_id
    where r.state = 'canceled'
    $$,
    $$values ('run.finished'::text, 'redundant'::text), ('run.finished', 'redundant')$$,
    'each cancellation leaves its terminal event in the journal'
);
select throws_ok(
    $$select runlane.cancel_redundant_timer_runs(null)$$, '22023', null, 'a missing limit is refused'
);

select * from finish();
rollback;
