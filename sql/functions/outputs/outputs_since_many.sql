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
-- * One statement, one index range per element (run_outputs_run_idx), no loop; not
--   fenced, never writes. With an organization (the login's scope, or the session's
--   runlane.org_id) every table is read by it: on Citus, one node. Without one, on a
--   schema Citus distributed, the runs' organizations are read first (every node), then
--   one statement per organization on its node: the same rows, in the same order.
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
    v_distributed boolean := false;
    v_org text;  -- on Citus: each organization of the runs in turn
    v_rows runlane.run_outputs[] := '{}'::runlane.run_outputs[];
    v_positions bigint[] := '{}'::bigint[];
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

    if v_scope is not null and to_regclass('runlane.agent_orgs') is not null then
        -- (a login held to one organization, or a session naming one: every table read by
        -- that organization, so on Citus the statement runs on its node alone)
        return query
        select o.*
        from unnest(p_run_ids, p_after_output_ids) with ordinality as q (run_id, after_id, pos)
        inner join runlane.runs as r
            on r.run_id = q.run_id and r.org_id = v_scope
        cross join lateral (
            select ro.*
            from runlane.run_outputs as ro
            where
                ro.run_id = q.run_id
                and ro.org_id = v_scope
                and ro.output_id > q.after_id
                and ro.kind in ('text', 'final', 'message_tool', 'card')
            order by ro.output_id
            limit p_limit
        ) as o
        order by q.pos, o.output_id;
        return;
    end if;
    -- Runs of any organization are read in one join, which Citus cannot plan across
    -- nodes: there the runs' organizations are read first, then each organization's runs
    -- on its node, the rows gathered and returned in the same order. (Citus's catalog in
    -- dynamic SQL, asked only where Citus is installed.)
    if to_regclass('pg_catalog.pg_dist_partition') is not null then
        execute 'select exists (select 1 from pg_catalog.pg_dist_partition where logicalrelid = $1)'
            into v_distributed
            using 'runlane.runs'::regclass;
    end if;
    if v_distributed then
        for v_org in
            select distinct r.org_id from runlane.runs as r where r.run_id = any(p_run_ids)
        loop
            select
                -- (a row built from the columns, not the shard's own row: its type is the
                -- shard table's on the node)
                coalesce(array_agg(row(o.*)::runlane.run_outputs order by q.pos, o.output_id), '{}') || v_rows,
                coalesce(array_agg(q.pos order by q.pos, o.output_id), '{}') || v_positions
            into v_rows, v_positions
            from unnest(p_run_ids, p_after_output_ids) with ordinality as q (run_id, after_id, pos)
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
            ) as o;
        end loop;
        return query
        select (v_rows[i]).*
        from generate_subscripts(v_rows, 1) as i
        order by v_positions[i], (v_rows[i]).output_id;
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
