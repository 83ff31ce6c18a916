-- outputs_since: the visible outputs of a run after a given output, for chat clients
-- that resume after a reconnect (they remember the last output_id they showed).
--
-- Guarantees:
-- * Only visible kinds (text, final, message_tool, card), output_id > p_after_output_id,
--   in output_id order (across attempts: the order they were written), at most p_limit
--   rows. Page by passing the last returned output_id.
-- * Not fenced: any reader of the run may page; it never writes.
-- * RL008 for an unknown run (or another organization's, for a login scoped to one);
--   22023 when p_limit is outside 1..10000; 22004 for null arguments.
create or replace function runlane.outputs_since(
    p_run_id bigint,
    p_after_output_id bigint default 0,
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
    v_org text;  -- the run's, named in every statement (on Citus, one node)
begin
    if p_run_id is null or p_after_output_id is null or p_limit is null then
        raise exception 'run id, after-output id and limit are required'
            using errcode = '22004';
    end if;
    if p_limit not between 1 and 10000 then
        raise exception 'limit must be between 1 and 10000, got %', p_limit
            using errcode = '22023';
    end if;
    -- (a login held to one organization names it: a foreign run is then not found, and on
    -- Citus every statement goes to that organization's node; else the run's own)
    if v_scope is null then
        select r.org_id into v_org from runlane.runs as r where r.run_id = outputs_since.p_run_id;
    else
        v_org := v_scope;
    end if;
    -- One statement when there is output: the run's scope is checked in the same read.
    if to_regclass('runlane.agent_orgs') is not null then  -- (0029, which Citus needs)
        return query
        select o.*
        from runlane.run_outputs as o
        where
            o.run_id = outputs_since.p_run_id
            and o.org_id = v_org  -- (the whole key: on Citus, one node)
            and o.output_id > outputs_since.p_after_output_id
            and o.kind in ('text', 'final', 'message_tool', 'card')
            and exists (
                select 1 from runlane.runs as r
                where r.run_id = outputs_since.p_run_id and r.org_id = v_org
            )
        order by o.output_id
        limit p_limit;
    else  -- (before 0029: by run id alone; before 0027 outputs name no organization)
        return query
        select o.*
        from runlane.run_outputs as o
        where
            o.run_id = outputs_since.p_run_id
            and o.output_id > outputs_since.p_after_output_id
            and o.kind in ('text', 'final', 'message_tool', 'card')
            and exists (
                select 1 from runlane.runs as r
                where r.run_id = outputs_since.p_run_id and r.org_id = v_org
            )
        order by o.output_id
        limit p_limit;
    end if;

    -- No row: nothing new, or a run this login may not read (unknown or another
    -- organization's, told apart by nothing).
    if not found and not exists (
        select 1 from runlane.runs as r
        where r.run_id = outputs_since.p_run_id and r.org_id = v_org
    ) then
        raise exception 'unknown run %', p_run_id
            using errcode = 'RL008';
    end if;
end;
$$;

comment on function runlane.outputs_since(bigint, bigint, int) is
'Visible outputs of a run with output_id > p_after_output_id, in order, at most p_limit '
'(1..10000). RL008 unknown run.';

-- The application's read, not the worker's: a worker reads a run it owns through the
-- fenced functions (run_messages, thread_history), never another run's output.
revoke all on function runlane.outputs_since(bigint, bigint, int) from public;
revoke all on function runlane.outputs_since(bigint, bigint, int) from runlane_worker;
grant execute on function runlane.outputs_since(bigint, bigint, int) to runlane_api;
