-- superseded_through: how much of a run's visible output was replaced by a later attempt.
--
-- Guarantees:
-- * Returns the highest output_id of the run's visible outputs (the kinds outputs_since
--   pages) that a later attempt superseded, 0 when none was: every visible output with
--   output_id <= the result is the partial output of an attempt that did not finish, and
--   is not part of the run's reply.
-- * An attempt supersedes the output of every earlier attempt when it started over:
--   claimed without a checkpoint (its run.claimed journal row says resumed = false). An
--   attempt claimed with a checkpoint resumes from it and continues the earlier output,
--   which stays (an agent writes a step's outputs with the checkpoint that covers them).
--   Claims journaled without that flag (the older generation's) supersede nothing.
-- * It only grows while the run lives (a new attempt can only add to it) and is final
--   once run_status says the run is terminal.
-- * RL008 for an unknown run (or another organization's, for a login scoped to one);
--   22004 for a null id. Reads only.
create or replace function runlane.superseded_through(p_run_id bigint)
returns bigint
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_org text;  -- the run's, named in every later statement (on Citus, one node)
    v_restart int;
begin
    if p_run_id is null then
        raise exception 'run id is required'
            using errcode = '22004';
    end if;
    -- (a login held to one organization, or a session naming one, reads by the whole key)
    if v_scope is null then
        select r.org_id into v_org
        from runlane.runs as r
        where r.run_id = superseded_through.p_run_id;
    else
        select r.org_id into v_org
        from runlane.runs as r
        where r.run_id = superseded_through.p_run_id and r.org_id = v_scope;
    end if;
    if not found then
        raise exception 'unknown run %', p_run_id
            using errcode = 'RL008';
    end if;

    if to_regclass('runlane.agent_orgs') is null then
        -- (before 0029: by run id alone; before 0027 journal and outputs name no organization)
        select max((e.detail ->> 'attempt')::int) into v_restart
        from runlane.run_events as e
        where
            e.run_id = superseded_through.p_run_id
            and e.event = 'run.claimed'
            and e.detail ->> 'resumed' = 'false';

        return coalesce((
            select max(o.output_id)
            from runlane.run_outputs as o
            where
                o.run_id = superseded_through.p_run_id
                and o.attempt < v_restart
                and o.kind in ('text', 'final', 'message_tool', 'card')
        ), 0);
    end if;

    -- The latest attempt that started over.
    select max((e.detail ->> 'attempt')::int) into v_restart
    from runlane.run_events as e
    where
        e.run_id = superseded_through.p_run_id
        and e.org_id = v_org
        and e.event = 'run.claimed'
        and e.detail ->> 'resumed' = 'false';

    return coalesce((
        select max(o.output_id)
        from runlane.run_outputs as o
        where
            o.run_id = superseded_through.p_run_id
            and o.org_id = v_org
            and o.attempt < v_restart
            and o.kind in ('text', 'final', 'message_tool', 'card')
    ), 0);
end;
$$;

comment on function runlane.superseded_through(bigint) is
'The highest visible output id of the run that a later attempt superseded (it started over '
'without a checkpoint), 0 when none. RL008 unknown run.';

revoke all on function runlane.superseded_through(bigint) from public;
grant execute on function runlane.superseded_through(bigint) to runlane_api, runlane_worker;
