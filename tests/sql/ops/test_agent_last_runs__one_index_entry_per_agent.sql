-- agent_last_runs reads one index entry per agent and source: the first of a backward
-- scan of runs_agent_history_idx (agent_id, created_at, run_id; finished runs, since
-- migration 0017) and of runs_unfinished_agent_idx per lane, which are the order "newest
-- by (created_at, run_id)" exactly, so no agent's runs are read and sorted (on the old
-- (agent_id, created_at) index every agent's newest runs went through a sort of their
-- own: 57 ms for 5,000 agents, bench/dashboard_queries.py). Ties on created_at still go
-- to the higher run_id.
begin;
select plan(4);

do $$
begin
    for i in 1..30 loop
        perform runlane_test.agent('agent-ix' || i, 'org-ix');
    end loop;
end
$$;

-- 50 finished runs per agent, an hour apart; agent-ix1's newest two share their creation.
insert into runlane.runs (
    org_id, agent_id, lane, trigger, state, prompt, model, created_at, finished_at
)
select
    'org-ix' as org_id,
    'agent-ix' || a as agent_id,
    'background' as lane,
    'manual' as trigger,
    'succeeded' as state,
    'x' as prompt,
    'noop' as model,
    timestamptz '2026-03-01 00:00+00' + h * interval '1 hour' as created_at,
    timestamptz '2026-03-01 00:00+00' + h * interval '1 hour' + interval '1 minute'
        as finished_at
from generate_series(1, 30) as a, generate_series(1, 50) as h
order by h, a;
insert into runlane.runs (
    org_id, agent_id, lane, trigger, state, prompt, model, created_at, finished_at
)
values (
    'org-ix', 'agent-ix1', 'background', 'manual', 'failed', 'x', 'noop',
    '2026-03-03 02:00+00', '2026-03-03 02:01+00'
);

analyze runlane.runs;
analyze runlane.agents;

create temp table before_read on commit drop as
select
    pg_stat_get_xact_numscans('runlane.runs_agent_history_idx'::regclass) as scans,
    pg_stat_get_xact_tuples_returned('runlane.runs_agent_history_idx'::regclass) as entries;

create temp table last_runs on commit drop as
select
    l.agent_id,
    l.run_id,
    l.state
from runlane.agent_last_runs() as l
where l.agent_id like 'agent-ix%';

select is(
    (select count(*) from last_runs),
    30::bigint,
    'one row per agent'
);

select is(
    (select l.state from last_runs as l where l.agent_id = 'agent-ix1'),
    'failed',
    'of two runs created at the same instant, the one with the higher run_id is the newest'
);

select cmp_ok(
    pg_stat_get_xact_numscans('runlane.runs_agent_history_idx'::regclass)
    - (select b.scans from before_read as b),
    '>=',
    30::bigint,
    'each agent''s newest run is found on runs_agent_history_idx'
);

select cmp_ok(
    pg_stat_get_xact_tuples_returned('runlane.runs_agent_history_idx'::regclass)
    - (select b.entries from before_read as b),
    '<=',
    30::bigint,
    'one index entry per agent, not its newest runs to sort'
);

select * from finish();
rollback;
