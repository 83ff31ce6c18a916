-- drain_legacy_deliveries: a bounded pass that deletes legacy run deliveries nobody
-- needs any more, so the contract step (0003) is not blocked by them forever once the
-- older workers are gone.
--
-- Guarantees: deletes at most p_limit run_jobs of task run_agent that no worker holds
-- (unlocked, or locked more than 4 hours ago: a crashed worker's, as take_delivery
-- treats them) and whose run is no longer queued, or does not exist: exactly the
-- deliveries an older worker would drop on taking them (start_run finds no queued run).
-- A delivery of a queued run stays (an older worker may still start it; direct dispatch
-- claims the run whether or not it stays). Jobs being taken right now are skipped (skip
-- locked). Scheduled and maintenance jobs are never touched. Returns the count.
create or replace function runlane.drain_legacy_deliveries(p_limit int default 500)
returns int
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_count int;
begin
    if p_limit is null or p_limit < 0 then
        raise exception 'limit must be zero or more, not %', coalesce(p_limit::text, 'null')
            using errcode = '22023';
    end if;
    -- GUARD: a schema Citus distributes has no legacy deliveries: runlane migrate --citus
    -- runs long after the contract step that ends them, and leaves their table on the
    -- coordinator alone, where no statement may read it beside the runs.
    if runlane._citus_distributed('runlane.runs') then
        return 0;
    end if;

    with droppable as (
        select j.id
        from runlane.run_jobs as j
        where j.task = 'run_agent'
          and (j.locked_at is null or j.locked_at < now() - interval '4 hours')
          and not exists (
              select 1 from runlane.runs as r
              where r.run_id = case
                      when jsonb_typeof(j.payload -> 'run_id') = 'number'
                          then (j.payload ->> 'run_id')::bigint
                  end
                and r.state = 'queued'
          )
        order by j.id
        limit p_limit
        for update skip locked
    ),
    deleted as (
        delete from runlane.run_jobs as j
        using droppable as d
        where j.id = d.id
        returning j.id
    )
    select count(*) into v_count from deleted;
    return v_count;
end;
$$;

comment on function runlane.drain_legacy_deliveries(int) is
'Deletes at most p_limit unheld legacy run deliveries whose run is no longer queued (an older worker '
'would drop them); returns the count.';

revoke all on function runlane.drain_legacy_deliveries(int) from public;
grant execute on function runlane.drain_legacy_deliveries(int) to runlane_worker;
