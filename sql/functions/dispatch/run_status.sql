-- run_status: what a client of any language needs to know whether a run's stream has
-- ended, and how.
--
-- Guarantees: one row for the run: its state (queued, running, succeeded, failed,
-- canceled, skipped), reason (e.g. canceled, cancel_requested while a Stop is on its
-- way, error, stale), attempt (the attempts counted so far; outputs_since's attempt of
-- the current one), last_output_id (the newest VISIBLE output, the kinds outputs_since
-- pages; null when none) and finished_at (null until terminal). Read in one snapshot:
-- once state is terminal no output can follow, so a client that has seen last_output_id
-- of a terminal run has seen the whole stream. RL008 for an unknown run or another
-- organization's (a login scoped to one); 22004 for a null id. Never writes.
create or replace function runlane.run_status(p_run_id bigint)
returns table (
    run_id bigint,
    state text,
    reason text,
    attempt int,
    last_output_id bigint,
    finished_at timestamptz
)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_org text;  -- the run's, named in every statement (on Citus, one node)
begin
    if p_run_id is null then
        raise exception 'run id is required'
            using errcode = '22004';
    end if;

    -- (a login held to one organization names it: a foreign run is then not found, and on
    -- Citus every statement goes to that organization's node; else the run's own)
    if v_scope is null then
        select r.org_id into v_org from runlane.runs as r where r.run_id = run_status.p_run_id;
    else
        v_org := v_scope;
    end if;
    -- (one statement, in one snapshot; named, the organization keeps the outputs' read on
    -- its node on Citus, which needs 0029; before it outputs are read by run id alone, and
    -- before 0027 they name no organization)
    if to_regclass('runlane.agent_orgs') is not null then
        return query
        select
            r.run_id,
            r.state,
            r.reason,
            r.attempts,
            (
                select max(o.output_id)
                from runlane.run_outputs as o
                where o.run_id = r.run_id
                  and o.org_id = v_org
                  and o.kind in ('text', 'final', 'message_tool', 'card')
            ),
            r.finished_at
        from runlane.runs as r
        where r.run_id = run_status.p_run_id and r.org_id = v_org;
    else
        return query
        select
            r.run_id,
            r.state,
            r.reason,
            r.attempts,
            (
                select max(o.output_id)
                from runlane.run_outputs as o
                where o.run_id = r.run_id
                  and o.kind in ('text', 'final', 'message_tool', 'card')
            ),
            r.finished_at
        from runlane.runs as r
        where r.run_id = run_status.p_run_id and r.org_id = v_org;
    end if;
    if not found then
        raise exception 'unknown run %', p_run_id
            using errcode = 'RL008';
    end if;
end;
$$;

comment on function runlane.run_status(bigint) is
'A run''s state, reason, attempt, newest visible output id and finished_at (the end of its '
'stream). RL008 unknown run.';

revoke all on function runlane.run_status(bigint) from public;
grant execute on function runlane.run_status(bigint) to runlane_api, runlane_worker;
