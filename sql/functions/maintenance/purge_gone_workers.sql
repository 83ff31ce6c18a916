-- purge_gone_workers: retention of runlane.workers, the registry of worker processes.
--
-- A worker's id is new with each process, so a fleet that restarts daily adds rows every
-- day; the registry answers "who is alive", and a row silent for the whole retention
-- window answers nothing any more. This deletes such rows.
--
-- Guarantees:
-- * Deletes at most p_limit (1 .. 10000) registry rows whose last refresh (heartbeat_at)
--   is older than now() - p_older_than, whose worker holds no claim receipt (those go
--   first, runlane.purge_stale_claim_receipts, with the same window) and no running run.
--   A live worker refreshes its row every 30 seconds: its row is never deleted.
-- * Rows of the older, queue-delivered generation are kept: the contract step reads them
--   (runlane.upgrade_status), and an operator retires them with the upgrade.
-- * A row another transaction holds is skipped, never waited for; a deleted worker that
--   comes back registers again (register_worker inserts its row).
-- * Returns the number deleted; p_limit returned means more may be waiting.
-- * p_older_than under 1 hour is refused (22023); 22004 for null arguments; 22023 for a
--   limit out of range.
create or replace function runlane.purge_gone_workers(
    p_older_than interval,
    p_limit int default 1000
)
returns int
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_cutoff timestamptz;
    v_purged int;
    v_worker record;
begin
    v_cutoff := runlane._require_registry_window('registry rows', p_older_than, p_limit);

    -- On a schema Citus distributes, worker by worker: the registry and the receipts are
    -- reference tables, the runs are on every node, and Citus locks no statement's rows
    -- read beside every node's; each worker's running runs are read apart, unlocked (a
    -- silent worker claims nothing more).
    if runlane._citus_distributed('runlane.runs') then
        v_purged := 0;
        for v_worker in
            select w.worker_id
            from runlane.workers as w
            where w.heartbeat_at < v_cutoff
              and w.generation >= 2 and w.deliveries = 'direct'
              and not exists (
                  select 1 from runlane.claim_receipts as c
                  where c.worker_id = w.worker_id
              )
            order by w.heartbeat_at
            limit purge_gone_workers.p_limit
            for update of w skip locked
        loop
            continue when exists (
                select 1 from runlane.runs as r
                where r.lease_owner = v_worker.worker_id and r.state = 'running'
            );
            delete from runlane.workers as w where w.worker_id = v_worker.worker_id;
            v_purged := v_purged + 1;
        end loop;
        return v_purged;
    end if;

    with gone_workers as (
        select w.worker_id
        from runlane.workers as w
        where w.heartbeat_at < v_cutoff
          and w.generation >= 2 and w.deliveries = 'direct'
          and not exists (
              select 1 from runlane.claim_receipts as c
              where c.worker_id = w.worker_id
          )
          and not exists (
              select 1 from runlane.runs as r
              where r.lease_owner = w.worker_id and r.state = 'running'
          )
        order by w.heartbeat_at
        limit purge_gone_workers.p_limit
        for update of w skip locked
    ),

    deleted as (
        delete from runlane.workers as w
        using gone_workers as g
        where w.worker_id = g.worker_id
        returning 1
    )

    select count(*)::int into v_purged from deleted;
    return v_purged;
end;
$$;

comment on function runlane.purge_gone_workers(interval, int) is
'Retention: deletes up to p_limit registry rows of workers silent for longer than '
'p_older_than (at least 1 hour), with no claim receipt and no running run. Returns the count.';

revoke all on function runlane.purge_gone_workers(interval, int) from public;
grant execute on function runlane.purge_gone_workers(interval, int) to runlane_worker;
