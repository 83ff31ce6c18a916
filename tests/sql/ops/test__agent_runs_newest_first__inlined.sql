-- The dashboard's agent reads (agent_page, agent_last_runs, agent_journal) run
-- _agent_runs_newest_first inlined into their statements, never as a call per agent (with
-- its own search_path, agent_last_runs over 5,000 agents took 135-160 ms against 70-100
-- ms inlined, on bench/dashboard_queries.py's data): with every function call counted,
-- the three count no call of it, and still return each agent's newest run.
begin;
select plan(4);

do $$
begin
    for i in 1..3 loop
        perform runlane_test.agent('agent-inl' || i, 'org-inl');
        perform runlane.submit_message('agent-inl' || i, 'thread-1', 'hello');
        perform runlane.submit_message('agent-inl' || i, 'thread-2', 'hello again');
    end loop;
end
$$;

set local track_functions = 'all';

create temp table page on commit drop as
select
    p.agent_id,
    p.last_run_id
from runlane.agent_page(null, 100, 'agent-inl', null) as p;
create temp table last_runs on commit drop as
select
    l.agent_id,
    l.run_id
from runlane.agent_last_runs() as l
where l.agent_id like 'agent-inl%';
create temp table journal on commit drop as
select j.run_id
from runlane.agent_journal('agent-inl2', 10) as j;

select is(
    coalesce(pg_stat_get_xact_function_calls('runlane._agent_runs_newest_first(text, int)'::regprocedure), 0),
    0::bigint,
    'agent_page, agent_last_runs and agent_journal never called _agent_runs_newest_first: it is inlined'
);
select is(
    (select array_agg(p.last_run_id order by p.agent_id) from page as p),
    (
        select array_agg(n.newest order by n.agent_id)
        from (
            select
                r.agent_id,
                max(r.run_id) as newest
            from runlane.runs as r
            where r.agent_id like 'agent-inl%'
            group by r.agent_id
        ) as n
    ),
    'agent_page shows each agent''s newest run'
);
select is(
    (select array_agg(l.run_id order by l.agent_id) from last_runs as l),
    (select array_agg(p.last_run_id order by p.agent_id) from page as p),
    'agent_last_runs agrees'
);
select is(
    (select array_agg(j.run_id) from journal as j),
    (
        select array_agg(r.run_id order by r.created_at desc, r.run_id desc)
        from runlane.runs as r
        where r.agent_id = 'agent-inl2'
    ),
    'agent_journal lists the agent''s runs newest first'
);

select * from finish();
rollback;
