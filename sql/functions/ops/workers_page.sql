-- workers_page: the dashboard's workers page: each worker, what it serves, whether it is
-- alive, what it runs and which one leads maintenance.
--
-- Guarantees: one row per worker in the registry (runlane.workers) and per lease owner of
-- a running run that has no registry row, ordered by worker_id:
--   host                 the registry's host, else the host part of a default worker id
--                        (host-pid-hex, as `runlane worker` names itself), else NULL;
--   lanes, handlers      what the worker registered (NULL when it registered nothing);
--   started_at, heartbeat_at, stopped_at   from the registry (NULL without a row);
--   running, stale       its running runs, and those of them whose last heartbeat is
--                        older than half their lease (runs_page's health rule);
--   leads_maintenance    it holds the unexpired maintenance lease (runlane.leader: the
--                        holder is the worker id, or the worker's application_name
--                        `runlane-worker:<id>` and a suffix, as `runlane worker` leads);
--   status               'stopped' (a clean exit), 'stale' (a running run is stale: the
--                        process is gone or hung), 'gone' (no registry refresh for 2
--                        minutes, upgrade_status's rule), else 'alive'.
-- A login scoped to an organization (runlane._api_org) sees every registered worker
-- (they serve every organization) but counts, and learns lease owners from, only its
-- organization's runs. Read-only; ids, names,
-- counts and times. 22004 for a null p_now.
--
-- Cost: the registry (one row per worker process, purged by purge_gone_workers) and the
-- running runs (runs_worker_running_idx); never the queue or history.
create or replace function runlane.workers_page(p_now timestamptz default now())
returns table (
    worker_id text,
    host text,
    lanes text[],
    handlers text[],
    started_at timestamptz,
    heartbeat_at timestamptz,
    stopped_at timestamptz,
    running int,
    stale int,
    leads_maintenance boolean,
    status text
)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_org text := runlane._api_org();  -- first: a scoped login counts its organization only
    v_leader text;
begin
    if p_now is null then
        raise exception 'workers_page needs an instant' using errcode = '22004';
    end if;
    perform runlane._check_instant('now', p_now);

    select l.leader into v_leader
    from runlane.leader as l
    where l.role = 'maintenance' and l.expires_at > p_now;

    return query
    with busy as (
        select
            r.lease_owner as worker_id,
            count(*)::int as running,
            count(*) filter (
                where coalesce(r.heartbeat_at, r.first_started_at) is null
                   or r.lease_expires_at is null
                   or p_now - coalesce(r.heartbeat_at, r.first_started_at)
                      > (r.lease_expires_at - coalesce(r.heartbeat_at, r.first_started_at)) / 2
            )::int as stale
        from runlane.runs as r
        where r.state = 'running' and r.lease_owner is not null
          and (v_org is null or r.org_id = v_org)
        group by r.lease_owner
    ),
    everyone as (
        select w.worker_id from runlane.workers as w
        union
        select b.worker_id from busy as b
    )
    select
        e.worker_id,
        coalesce(w.host, substring(e.worker_id from '^(.+)-[0-9]+-[0-9a-f]{6}$')),
        w.lanes,
        w.handlers,
        w.started_at,
        w.heartbeat_at,
        w.stopped_at,
        coalesce(b.running, 0),
        coalesce(b.stale, 0),
        -- a worker leads as `runlane-worker:<id>` (its application_name, 63 characters at
        -- most) and a random suffix
        (v_leader = e.worker_id
         or regexp_replace(v_leader, '/[0-9a-f]{8}$', '') = left('runlane-worker:' || e.worker_id, 63))
        is true,
        case
            when w.stopped_at is not null and coalesce(b.running, 0) = 0 then 'stopped'
            when coalesce(b.stale, 0) > 0 then 'stale'
            when w.worker_id is null or w.heartbeat_at <= p_now - interval '2 minutes' then 'gone'
            else 'alive'
        end
    from everyone as e
    left join runlane.workers as w on w.worker_id = e.worker_id
    left join busy as b on b.worker_id = e.worker_id
    order by e.worker_id;
end;
$$;

comment on function runlane.workers_page(timestamptz) is
'Each worker: host, lanes, handlers, registry times, running and stale runs, whether it leads '
'maintenance, and status (alive, stale, gone, stopped).';

revoke all on function runlane.workers_page(timestamptz) from public;
grant execute on function runlane.workers_page(timestamptz) to runlane_api;
