-- outputs_since_many: the visible outputs of many runs, each after its own output, in one
-- call, for a process that follows many chat streams and reads after each burst of hints.
--
-- Guarantees:
-- * For each element i: the visible outputs (text, final, message_tool, card) of run
--   p_run_ids[i] with output_id > p_after_output_ids[i], in output_id order, at most
--   p_limit of them. Rows come by element position, then output_id; an id named twice
--   is read twice.
-- * A run this login may not read (unknown, or another organization's for a login scoped
--   to one) contributes no row, exactly like a run with nothing new: callers hold a
--   stream token per run, so they know their runs exist.
-- * One index range per element (run_outputs_run_idx); not fenced, never writes. A login
--   for every organization reads in one statement. With an organization (the login's
--   scope, or the session's runlane.org_id) the statement names it in every table: on
--   Citus, one node. On a schema Citus distributed, a login for every organization reads
--   the runs' organizations first (every node), then in one such statement per stretch
--   of consecutive elements of one organization, on its node: the same rows, in the same
--   order.
-- * 22004 for a null array or element; 22023 when the arrays differ in length, hold
--   more than 1000 elements, or p_limit is outside 1..10000.
create or replace function runlane.outputs_since_many(
    p_run_ids bigint[],
    p_after_output_ids bigint[],
    p_limit int default 500
)
returns setof runlane.run_outputs
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_n int := cardinality(p_run_ids);
    v_ends int[];  -- the last element of each stretch of one organization (null: no stretch)
    v_orgs text[];  -- each stretch's organization (null: unknown runs)
    v_known_runs bigint[];
    v_known_orgs text[];
    v_first int;
    v_last int;
    v_org text;
begin
    if p_run_ids is null or p_after_output_ids is null or p_limit is null then
        raise exception 'run ids, after-output ids and limit are required'
            using errcode = '22004';
    end if;
    if array_position(p_run_ids, null) is not null
       or array_position(p_after_output_ids, null) is not null then
        raise exception 'run ids and after-output ids may not contain null'
            using errcode = '22004';
    end if;
    if v_n <> cardinality(p_after_output_ids) then
        raise exception 'run ids and after-output ids differ in length (% and %)',
            v_n, cardinality(p_after_output_ids)
            using errcode = '22023',
                  hint = 'Pass one after-output id per run id, in the same order.';
    end if;
    if v_n > 1000 then
        raise exception 'at most 1000 runs per call, got %', v_n
            using errcode = '22023',
                  hint = 'Split the runs into several calls.';
    end if;
    if p_limit not between 1 and 10000 then
        raise exception 'limit must be between 1 and 10000, got %', p_limit
            using errcode = '22023';
    end if;

    -- Each element's organization, where a statement must name it: the one a login is
    -- held to or a session names; on a schema Citus distributed, each run's own, read
    -- first (one join over many organizations is beyond Citus's planner). Then one
    -- statement per stretch of consecutive elements of one organization, naming it in
    -- every table (on Citus: on its node alone), so the rows come in the call's order.
    -- (Citus's catalog is asked only where Citus is installed: runlane._citus_distributed.)
    if v_scope is not null and to_regclass('runlane.agent_orgs') is not null then
        v_ends := array[v_n];
        v_orgs := array[v_scope];
    elsif runlane._citus_distributed('runlane.runs') then
        select coalesce(array_agg(r.run_id), '{}'), coalesce(array_agg(r.org_id), '{}')
        into v_known_runs, v_known_orgs
        from runlane.runs as r
        where r.run_id = any(p_run_ids);
        -- (the stretches: where the next element's organization differs, or none follows)
        select coalesce(array_agg(e.pos order by e.pos), '{}'), coalesce(array_agg(e.org_id order by e.pos), '{}')
        into v_ends, v_orgs
        from (
            select
                x.pos,
                x.org_id,
                lead(x.org_id) over (order by x.pos) is distinct from x.org_id
                or x.pos = v_n as last_of_stretch
            from (
                select u.pos::int as pos, v_known_orgs[array_position(v_known_runs, u.run_id)] as org_id
                from unnest(p_run_ids) with ordinality as u (run_id, pos)
            ) as x
        ) as e
        where e.last_of_stretch;
    end if;
    if v_ends is not null then
        v_first := 1;
        for k in 1 .. cardinality(v_ends) loop
            v_last := v_ends[k];
            v_org := v_orgs[k];
            if v_org is not null then  -- (an unknown run gives no row)
                return query
                select o.*
                from unnest(p_run_ids[v_first:v_last], p_after_output_ids[v_first:v_last])
                    with ordinality as q (run_id, after_id, pos)
                inner join runlane.runs as r
                    on r.run_id = q.run_id and r.org_id = v_org
                cross join lateral (
                    select ro.*
                    from runlane.run_outputs as ro
                    where
                        ro.run_id = q.run_id
                        and ro.org_id = v_org
                        and ro.output_id > q.after_id
                        and ro.kind in ('text', 'final', 'message_tool', 'card')
                    order by ro.output_id
                    limit p_limit
                ) as o
                order by q.pos, o.output_id;
            end if;
            v_first := v_last + 1;
        end loop;
        return;
    end if;
    return query
    select o.*
    from unnest(p_run_ids, p_after_output_ids) with ordinality as q (run_id, after_id, pos)
    inner join runlane.runs as r
        on r.run_id = q.run_id and (v_scope is null or r.org_id = v_scope)
    cross join lateral (
        select ro.*
        from runlane.run_outputs as ro
        where
            ro.run_id = q.run_id
            and ro.output_id > q.after_id
            and ro.kind in ('text', 'final', 'message_tool', 'card')
        order by ro.output_id
        limit p_limit
    ) as o
    order by q.pos, o.output_id;
end;
$$;

comment on function runlane.outputs_since_many(bigint[], bigint[], int) is
'Visible outputs of each run p_run_ids[i] with output_id > p_after_output_ids[i], at most '
'p_limit (1..10000) per run, by position then output_id; unreadable runs give no row.';

-- The application's read, like outputs_since: a worker never reads another run's output.
revoke all on function runlane.outputs_since_many(bigint[], bigint[], int) from public;
revoke all on function runlane.outputs_since_many(bigint[], bigint[], int) from runlane_worker;
grant execute on function runlane.outputs_since_many(bigint[], bigint[], int) to runlane_api;
