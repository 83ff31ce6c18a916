-- publish_run: the publisher of a committed run (the requirements' RunJobPublisher).
--
-- Guarantees:
-- * Records p_wake_at as the run's wake time when it is given and the run is still
--   queued (a run already started keeps its state; NULL changes nothing).
-- * Then notifies runlane_runs with {run_id, lane} (runlane._notify_run), delivered when
--   this transaction commits. Call it in its own transaction AFTER the run committed:
--   a failure here (or at its commit) loses nothing, the workers' periodic scan finds
--   the run anyway.
-- * RL008 for an unknown run (or another organization's, for a login scoped to one:
--   checked before anything is written); 22004 for a null run id (a "held" submit has no run to
--   publish); 22023 for an infinite wake time.
create or replace function runlane.publish_run(p_run_id bigint, p_wake_at timestamptz default null)
returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_lane text;
    v_org text;  -- the run's: the update names its whole key (on Citus, one node)
begin
    if p_run_id is null then
        raise exception 'run id is required (a held message has no run to publish)'
            using errcode = '22004';
    end if;
    -- An infinite wake time would park the run (and its thread) forever.
    if not isfinite(p_wake_at) then
        raise exception 'a wake time must be a finite instant, got %', p_wake_at
            using errcode = '22023';
    end if;

    perform runlane._check_wake_at(p_wake_at);

    -- (a login held to one organization names it: a foreign run is then not found, and on
    -- Citus every statement goes to that organization's node; else the run's own)
    if v_scope is null then
        select r.org_id into v_org from runlane.runs as r where r.run_id = publish_run.p_run_id;
    else
        v_org := v_scope;
    end if;
    select r.lane into v_lane
    from runlane.runs as r
    where r.run_id = publish_run.p_run_id and r.org_id = v_org;
    if not found then
        raise exception 'unknown run %', p_run_id
            using errcode = 'RL008';
    end if;

    if p_wake_at is not null then
        update runlane.runs as r
        set wake_at = publish_run.p_wake_at
        -- (`is true`: no partial index on queued runs matches; see submit_message)
        where r.run_id = publish_run.p_run_id and r.org_id = v_org and (r.state = 'queued') is true;
    end if;

    perform runlane._notify_run(p_run_id, v_lane);
end;
$$;

comment on function runlane.publish_run(bigint, timestamptz) is
'Records an optional wake time on a queued run, then notifies runlane_runs {run_id, lane}. '
'Call after the run committed; its failure is harmless (the scan recovers). RL008 unknown run.';

revoke all on function runlane.publish_run(bigint, timestamptz) from public;
grant execute on function runlane.publish_run(bigint, timestamptz) to runlane_api, runlane_worker;
