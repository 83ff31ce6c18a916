-- thread_history covers the thread's earlier runs whatever their state: since migration
-- 0017 the finished ones come from runs_thread_history_idx and the unfinished ones from
-- the unfinished-run indexes (an interactive run still queued or running, the agent's
-- background run on the thread), merged in run_id order.
begin;
select plan(3);

do $$ begin perform runlane_test.agent('agent-a'); end $$;

-- Earlier runs on thread-1, oldest first: a finished chat run, a background run still
-- running, an interactive run still queued (each with a visible reply of its own).
create temp table earlier on commit drop as
with rows (state, lane, reply) as (
    values ('succeeded', 'interactive', 'finished reply'),
    ('running', 'background', 'background reply'),
    ('queued', 'interactive', 'queued reply')
),

inserted as (
    insert into runlane.runs (
        org_id, agent_id, lane, trigger, state, thread_id, prompt, model,
        finished_at
    )
    select
        'org-a' as org_id,
        'agent-a' as agent_id,
        r.lane,
        'manual' as trigger,
        r.state,
        'thread-1' as thread_id,
        'x' as prompt,
        'noop' as model,
        case when r.state = 'succeeded' then now() end as finished_at
    from rows as r
    order by r.reply = 'queued reply', r.lane = 'background' desc
    returning run_id, state
)

select
    i.run_id,
    r.reply
from inserted as i
inner join rows as r on i.state = r.state;

insert into runlane.run_outputs (org_id, run_id, attempt, kind, body)
select
    'org-a' as org_id,
    e.run_id,
    1 as attempt,
    'final' as kind,
    e.reply as body
from earlier as e;

-- The run asking for its history (also on thread-1), and a later run that is not history.
create temp table asking on commit drop as
select runlane_test.queued_run('agent-a', 'interactive', 'manual') as run_id;
update runlane.runs set thread_id = 'thread-1' where run_id = (select run_id from asking);
create temp table f on commit drop as
select runlane_test.claimed((select run_id from asking)) as fence;

select results_eq(
    $$select body from runlane.thread_history((select run_id from asking), (select fence from f))
      order by run_id$$,
    $$select reply from earlier order by run_id$$,
    'finished, running and queued earlier runs of the thread are all history'
);
select results_eq(
    $$select body from runlane.thread_history((select run_id from asking), (select fence from f), 2)
      order by run_id$$,
    $$select reply from (select * from earlier order by run_id desc limit 2) as e order by run_id$$,
    'p_limit keeps the latest earlier runs across the sources'
);
select is(
    (select count(*) from runlane.thread_history((select run_id from asking), (select fence from f), 1)),
    1::bigint,
    'p_limit 1: one earlier run'
);

select * from finish();
rollback;
