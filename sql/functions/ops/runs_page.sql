-- runs_page: the dashboard's runs page: runs of one state (or of every state), filtered by
-- lane, organization, agent and thread, in the order an operator reads that state.
--
-- Guarantees: at most p_limit runs (1 .. 1000), chosen and ordered by p_state:
--   queued               oldest first (created_at, run_id): the head of the queue;
--   running              longest silent first (heartbeat_at, run_id): stale runs on top;
--   succeeded, failed, canceled, skipped
--                        finished in the window (finished_at > p_now - p_since), newest
--                        finish first;
--   NULL                 every state, newest first (created_at, run_id descending).
-- p_lane, p_org_id, p_agent_id, p_thread_id (NULL: no filter) keep the runs that match;
-- a thread is an agent's, so p_thread_id without p_agent_id is refused (22023). Each row:
-- the run's agent, organization, lane, trigger, state, reason, attempts, thread, created,
-- first start and finish times; for a running run its worker (lease_owner), last
-- heartbeat, lease expiry, heartbeat_age_ms and health: 'stale' once its last heartbeat
-- is older than half its lease (the runner beats every third of the lease: one beat
-- interval and half a beat of slack), so a killed worker's runs read stale within one
-- beat, long before reap_stale takes them at lease expiry; else 'healthy' (NULL for a run
-- not running); and for a failed run the error's class (the message is not returned: it
-- can quote user content; run_detail has it). 22004 for a null p_limit, p_since or
-- p_now; 22023 for an unknown state or lane, a limit outside 1 .. 1000 or a window
-- outside 1 minute .. 7 days. A login scoped to an organization (runlane._api_org) sees
-- that organization's runs only. Read-only; ids, states and times, no prompt.
--
-- Cost: bounded by the page: each state reads its runs through an index in the page's
-- order (the queue on runs_unfinished_lane_idx per lane and claim class, running runs on
-- runs_worker_running_idx, finished ones backwards on runs_finished_idx, an agent's on
-- its history indexes), stopping after p_limit matches per index range.
create or replace function runlane.runs_page(
    p_state text default null,
    p_lane text default null,
    p_org_id text default null,
    p_agent_id text default null,
    p_thread_id text default null,
    p_limit int default 100,
    p_since interval default '1 hour',
    p_now timestamptz default now()
) returns table (
    run_id bigint,
    agent_id text,
    org_id text,
    lane text,
    trigger text,
    state text,
    reason text,
    attempts int,
    max_attempts int,
    thread_id text,
    created_at timestamptz,
    first_started_at timestamptz,
    finished_at timestamptz,
    worker text,
    heartbeat_at timestamptz,
    lease_expires_at timestamptz,
    heartbeat_age_ms bigint,
    health text,
    error_class text
)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
set jit = off
-- planned for its filters every call: a NULL filter then costs nothing, and each state's
-- branch reads the index its filters call for
set plan_cache_mode = force_custom_plan
as $$
declare
    v_org text := runlane._api_org();  -- first: a scoped login sees its organization only
    v_state text := nullif(p_state, '');
    v_lane text := nullif(p_lane, '');
    v_ids bigint[];
    v_queue record;
    v_queued_ids bigint[] := '{}'::bigint[];  -- (on Citus: each queue's oldest, unmerged)
    v_queued_at timestamptz[] := '{}'::timestamptz[];
begin
    if p_limit is null or p_since is null or p_now is null then
        raise exception 'runs_page needs a page size, a window and an instant'
            using errcode = '22004';
    end if;
    perform runlane._check_instant('now', p_now);
    if p_limit < 1 or p_limit > 1000 then
        raise exception 'the page size must be between 1 and 1000, got %', p_limit
            using errcode = '22023';
    end if;
    if p_since < interval '1 minute' or p_since > interval '7 days' then
        raise exception 'the window must be between 1 minute and 7 days, got %', p_since
            using errcode = '22023';
    end if;
    if v_state is not null
       and v_state not in ('queued', 'running', 'succeeded', 'failed', 'canceled', 'skipped') then
        raise exception 'unknown run state %', p_state
            using errcode = '22023',
                  hint = 'One of queued, running, succeeded, failed, canceled, skipped.';
    end if;
    if v_lane is not null and v_lane not in ('interactive', 'background') then
        raise exception 'unknown lane %', p_lane
            using errcode = '22023',
                  hint = 'One of interactive, background.';
    end if;
    if p_thread_id is not null and p_agent_id is null then
        raise exception 'a thread filter needs its agent'
            using errcode = '22023',
                  hint = 'Pass p_agent_id too: thread ids are per agent.';
    end if;

    if v_state = 'queued' and v_org is null and p_org_id is null
       and runlane._citus_distributed('runlane.runs') then
        -- (every node's queue: Citus limits no lateral read over VALUES, so each lane and
        -- claim class is its own read, each merged from every node's shards)
        for v_queue in
            select l.lane, c.claim_class
            from (values ('interactive'), ('background')) as l (lane)
            cross join (values (0::smallint), (1::smallint)) as c (claim_class)
            where v_lane is null or l.lane = v_lane
        loop
            select v_queued_ids || coalesce(array_agg(q.run_id), '{}'),
                   v_queued_at || coalesce(array_agg(q.created_at), '{}')
            into v_queued_ids, v_queued_at
            from (
                select r.run_id, r.created_at
                from runlane.runs as r
                where r.lane = v_queue.lane and r.state = 'queued'
                  and r.claim_class = v_queue.claim_class
                  and (p_agent_id is null or r.agent_id = p_agent_id)
                  and (p_thread_id is null or r.thread_id = p_thread_id)
                order by r.created_at, r.run_id
                limit p_limit
            ) as q;
        end loop;
        select array_agg(q.run_id order by q.created_at, q.run_id) into v_ids
        from (
            select u.run_id, u.created_at
            from unnest(v_queued_ids, v_queued_at) as u (run_id, created_at)
            order by u.created_at, u.run_id
            limit p_limit
        ) as q;
    elsif v_state = 'queued' then
        -- per lane and claim class, the oldest queued runs on runs_unfinished_lane_idx,
        -- merged
        select array_agg(q.run_id order by q.created_at, q.run_id) into v_ids
        from (
            select x.run_id, x.created_at
            from (values ('interactive'), ('background')) as l (lane)
            cross join (values (0::smallint), (1::smallint)) as c (claim_class)
            cross join lateral (
                select r.run_id, r.created_at
                from runlane.runs as r
                where r.lane = l.lane and r.state = 'queued' and r.claim_class = c.claim_class
                  and (v_org is null or r.org_id = v_org)
                  and (p_org_id is null or r.org_id = p_org_id)
                  and (p_agent_id is null or r.agent_id = p_agent_id)
                  and (p_thread_id is null or r.thread_id = p_thread_id)
                order by r.created_at, r.run_id
                limit p_limit
            ) as x
            where v_lane is null or l.lane = v_lane
            order by x.created_at, x.run_id
            limit p_limit
        ) as q;
    elsif v_state = 'running' then
        select array_agg(q.run_id order by q.heartbeat_at nulls first, q.run_id) into v_ids
        from (
            select r.run_id, r.heartbeat_at
            from runlane.runs as r
            where r.state = 'running'
              and (v_lane is null or r.lane = v_lane)
              and (v_org is null or r.org_id = v_org)
              and (p_org_id is null or r.org_id = p_org_id)
              and (p_agent_id is null or r.agent_id = p_agent_id)
              and (p_thread_id is null or r.thread_id = p_thread_id)
            order by r.heartbeat_at nulls first, r.run_id
            limit p_limit
        ) as q;
    elsif v_state is not null then
        select array_agg(q.run_id order by q.finished_at desc, q.run_id desc) into v_ids
        from (
            select r.run_id, r.finished_at
            from runlane.runs as r
            where r.finished_at > p_now - p_since
              and r.state = v_state
              and (v_lane is null or r.lane = v_lane)
              and (v_org is null or r.org_id = v_org)
              and (p_org_id is null or r.org_id = p_org_id)
              and (p_agent_id is null or r.agent_id = p_agent_id)
              and (p_thread_id is null or r.thread_id = p_thread_id)
            order by r.finished_at desc, r.run_id desc
            limit p_limit
        ) as q;
    elsif p_agent_id is not null then
        -- an agent's runs, newest first: its unfinished and its finished runs, each on
        -- its own index, merged
        select array_agg(q.run_id order by q.created_at desc, q.run_id desc) into v_ids
        from (
            select u.run_id, u.created_at
            from (
                (
                    select r.run_id, r.created_at
                    from runlane.runs as r
                    where r.agent_id = p_agent_id and r.state in ('queued', 'running')
                      and (v_lane is null or r.lane = v_lane)
                      and (v_org is null or r.org_id = v_org)
                      and (p_org_id is null or r.org_id = p_org_id)
                      and (p_thread_id is null or r.thread_id = p_thread_id)
                    order by r.created_at desc, r.run_id desc
                    limit p_limit
                )
                union all
                (
                    select r.run_id, r.created_at
                    from runlane.runs as r
                    where r.agent_id = p_agent_id and r.state not in ('queued', 'running')
                      and (v_lane is null or r.lane = v_lane)
                      and (v_org is null or r.org_id = v_org)
                      and (p_org_id is null or r.org_id = p_org_id)
                      and (p_thread_id is null or r.thread_id = p_thread_id)
                    order by r.created_at desc, r.run_id desc
                    limit p_limit
                )
            ) as u
            order by u.created_at desc, u.run_id desc
            limit p_limit
        ) as q;
    else
        -- newest first in run_id order (ids are handed out in creation order)
        select array_agg(q.run_id order by q.run_id desc) into v_ids
        from (
            select r.run_id
            from runlane.runs as r
            where (v_lane is null or r.lane = v_lane)
              and (v_org is null or r.org_id = v_org)
              and (p_org_id is null or r.org_id = p_org_id)
            order by r.run_id desc
            limit p_limit
        ) as q;
    end if;

    return query
    select
        r.run_id,
        r.agent_id,
        r.org_id,
        r.lane,
        r.trigger,
        r.state,
        r.reason,
        r.attempts,
        r.max_attempts,
        r.thread_id,
        r.created_at,
        r.first_started_at,
        r.finished_at,
        case when r.state = 'running' then r.lease_owner end,
        case when r.state = 'running' then r.heartbeat_at end,
        case when r.state = 'running' then r.lease_expires_at end,
        case when r.state = 'running' then
            round(extract(epoch from (p_now - h.beat)) * 1000)::bigint
        end,
        case
            when r.state <> 'running' then null
            when h.beat is null or r.lease_expires_at is null
                 or p_now - h.beat > (r.lease_expires_at - h.beat) / 2 then 'stale'
            else 'healthy'
        end,
        case when r.state = 'failed' then
            substring(r.last_error from '^([A-Za-z_][A-Za-z0-9_.]*): ')
        end
    from unnest(v_ids) with ordinality as p (run_id, ord)
    join runlane.runs as r
        on r.run_id = p.run_id
        -- (the page's runs are of these already; named, on Citus they are read on one node)
        and (v_org is null or r.org_id = v_org)
        and (p_org_id is null or r.org_id = p_org_id)
    cross join lateral (select coalesce(r.heartbeat_at, r.first_started_at) as beat) as h
    order by p.ord;
end;
$$;

comment on function runlane.runs_page(text, text, text, text, text, int, interval, timestamptz) is
'Runs of one state (or all), filtered by lane, organization, agent and thread, in the order '
'that state is read; running runs with worker, heartbeat age and health (healthy or stale).';

revoke all on function runlane.runs_page(text, text, text, text, text, int, interval, timestamptz)
from public;
grant execute on function runlane.runs_page(text, text, text, text, text, int, interval, timestamptz)
to runlane_api;
