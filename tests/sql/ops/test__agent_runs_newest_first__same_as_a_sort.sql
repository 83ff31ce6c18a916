-- runlane._agent_runs_newest_first merges an agent's finished runs (runs_agent_history_idx)
-- with its unfinished ones per lane (runs_unfinished_agent_idx) and must return exactly
-- what sorting all of the agent's runs by (created_at desc, run_id desc) returns: runs in
-- every state and both lanes, created at instants many of them share, for every limit;
-- and so must runlane._agent_runs_newest_first_of_org, its form for Citus.
begin;
select plan(4);

do $$
begin
    for i in 1..4 loop
        perform runlane_test.agent('agent-nf' || i, 'org-nf');
    end loop;
end
$$;

select setseed(0.15);

-- 400 interactive runs in every state, on 30 distinct instants (many ties).
insert into runlane.runs (
    org_id, agent_id, lane, trigger, state, thread_id, prompt, model, created_at, finished_at
)
select
    'org-nf' as org_id,
    'agent-nf' || (1 + floor(random() * 4))::int as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    s.state,
    'thread-' || (g % 7) as thread_id,
    'x' as prompt,
    'noop' as model,
    timestamptz '2026-03-01 00:00+00' + floor(random() * 30) * interval '1 minute' as created_at,
    case
        when s.state in ('queued', 'running') then null
        else timestamptz '2026-03-02 00:00+00'
    end as finished_at
from generate_series(1, 400) as g
cross join lateral (
    select (array['queued', 'running', 'succeeded', 'failed', 'canceled', 'skipped'])[
        1 + floor(random() * 6)::int + (g * 0)
    ] as state
) as s;

-- Finished background runs, and one unfinished background run for three of the agents
-- (at most one per agent), one of them newer than all the agent's other runs.
insert into runlane.runs (
    org_id, agent_id, lane, trigger, state, prompt, model, created_at, finished_at
)
select
    'org-nf' as org_id,
    'agent-nf' || (1 + g % 4) as agent_id,
    'background' as lane,
    'manual' as trigger,
    'succeeded' as state,
    'x' as prompt,
    'noop' as model,
    timestamptz '2026-03-01 00:00+00' + (g % 30) * interval '1 minute' as created_at,
    timestamptz '2026-03-02 00:00+00' as finished_at
from generate_series(1, 40) as g;
insert into runlane.runs (org_id, agent_id, lane, trigger, state, prompt, model, created_at)
values
('org-nf', 'agent-nf1', 'background', 'manual', 'queued', 'x', 'noop', '2026-03-01 00:10+00'),
('org-nf', 'agent-nf2', 'background', 'manual', 'running', 'x', 'noop', '2026-03-01 00:29+00'),
('org-nf', 'agent-nf3', 'background', 'manual', 'queued', 'x', 'noop', '2026-03-01 05:00+00');

analyze runlane.runs;

select is_empty(
    $$
        select a.agent_id, n.n
        from (values ('agent-nf1'), ('agent-nf2'), ('agent-nf3'), ('agent-nf4')) as a (agent_id)
        cross join (values (1), (2), (5), (40), (1000)) as n (n)
        where
            array(
                select f.run_id from runlane._agent_runs_newest_first(a.agent_id, n.n) as f
            )
            is distinct from
            array(
                select r.run_id
                from runlane.runs as r
                where r.agent_id = a.agent_id
                order by r.created_at desc, r.run_id desc
                limit n.n
            )
    $$,
    'every agent, every limit: the same runs in the same order as a sort of all its runs'
);

select is(
    (select f.run_id from runlane._agent_runs_newest_first('agent-nf3', 1) as f),
    (
        select r.run_id
        from runlane.runs as r where
            r.agent_id = 'agent-nf3' and r.lane = 'background'
            and r.state = 'queued'
    ),
    'an unfinished background run newer than everything else is the newest'
);

select is(
    (select count(*) from runlane._agent_runs_newest_first('agent-nf4', 1000)),
    (select count(*) from runlane.runs where agent_id = 'agent-nf4'),
    'a limit above the agent''s run count returns every run once'
);

select is_empty(
    $$
        select a.agent_id, n.n
        from (values ('agent-nf1'), ('agent-nf2'), ('agent-nf3'), ('agent-nf4')) as a (agent_id)
        cross join (values (1), (2), (5), (40), (1000)) as n (n)
        where
            array(
                select f.run_id
                from runlane._agent_runs_newest_first_of_org(a.agent_id, 'org-nf', n.n) as f
            )
            is distinct from
            array(
                select f.run_id from runlane._agent_runs_newest_first(a.agent_id, n.n) as f
            )
    $$,
    'the form naming the organization answers as the inlined one, every agent, every limit'
);

select * from finish();
rollback;
