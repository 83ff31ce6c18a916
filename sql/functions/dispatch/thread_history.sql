-- thread_history: the earlier turns of a run's chat thread, for an agent that sends the
-- conversation to a model.
--
-- Guarantees:
-- * Fenced: only the run's current owner (running, same fence, holding its computer)
--   may read it (runlane._require_owner); RL001 when fenced out, RL008 for an unknown run.
-- * Covers the last p_limit runs of the same agent and thread created before this run
--   (run_id order; none when the run has no thread). For each, in order: its attached
--   messages as role 'user' (message_id order), then its visible reply as ONE role
--   'assistant' row: the bodies of its `text` and `final` outputs joined in output order,
--   from every attempt (what a chat client showed; a run with no such output has no
--   assistant row). The run's own messages are not included: run_messages returns them.
-- * Messages still held (attached to no run yet) are not returned.
-- * A read: the run row is locked as every fenced call locks it; nothing is written.
-- * 22004 for a null p_limit, 22023 for one outside 1..1000.
create or replace function runlane.thread_history(
    p_run_id bigint, p_fence bigint, p_limit int default 20
)
returns table (run_id bigint, role text, body text, created_at timestamptz)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_run runlane.runs;
begin
    -- GUARD: arguments.
    if p_limit is null then
        raise exception 'a limit of earlier runs is required'
            using errcode = '22004';
    end if;
    if p_limit < 1 or p_limit > 1000 then
        raise exception 'a thread history covers 1 to 1000 earlier runs, not %', p_limit
            using errcode = '22023',
                  hint = 'Ask for the last few runs (the default is 20).';
    end if;

    v_run := runlane._require_owner(p_run_id, p_fence);
    if v_run.thread_id is null then
        return;
    end if;

    return query
    -- The thread's earlier runs from the indexes a run is in: the finished ones from
    -- runs_thread_history_idx, the unfinished interactive ones from
    -- runs_unfinished_thread_idx, and the agent's one unfinished background run
    -- (migration 0017: a claim writes into no thread index of all the thread's runs).
    with earlier as (
        select u.run_id
        from (
            (
                select r.run_id
                from runlane.runs as r
                where
                    r.agent_id = v_run.agent_id
                    and r.thread_id = v_run.thread_id
                    and r.state not in ('queued', 'running')
                    and r.run_id < v_run.run_id
                order by r.run_id desc
                limit thread_history.p_limit
            )
            union all
            select r.run_id
            from runlane.runs as r
            where
                r.agent_id = v_run.agent_id
                and r.thread_id = v_run.thread_id
                and r.lane = 'interactive'
                and r.state in ('queued', 'running')
                and r.run_id < v_run.run_id
            union all
            select r.run_id
            from runlane.runs as r
            where
                r.agent_id = v_run.agent_id
                and r.thread_id = v_run.thread_id
                and r.lane = 'background'
                and r.state in ('queued', 'running')
                and r.run_id < v_run.run_id
        ) as u
        order by u.run_id desc
        limit thread_history.p_limit
    ),

    turns as (
        select
            m.run_id,
            0 as part,
            m.message_id as ord,
            'user'::text as role,
            m.body,
            m.created_at
        from earlier as e
        inner join runlane.messages as m on m.run_id = e.run_id
        union all
        select
            o.run_id,
            1 as part,
            min(o.output_id) as ord,
            'assistant'::text as role,
            string_agg(o.body, '' order by o.output_id) as body,
            max(o.created_at) as created_at
        from earlier as e
        inner join runlane.run_outputs as o on o.run_id = e.run_id
        where o.kind in ('text', 'final')
        group by o.run_id
    )

    select t.run_id, t.role, t.body, t.created_at
    from turns as t
    order by t.run_id, t.part, t.ord;
end;
$$;

comment on function runlane.thread_history(bigint, bigint, integer) is
'The earlier turns of an owned run''s thread (last p_limit runs): user messages and each '
'run''s joined visible reply. RL001 fenced out, RL008 unknown run, 22004/22023 bad limit.';

revoke all on function runlane.thread_history(bigint, bigint, integer) from public;
grant execute on function runlane.thread_history(bigint, bigint, integer) to runlane_worker;
