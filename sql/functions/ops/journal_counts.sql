-- journal_counts: the journal's counters for a worker's metrics, under least privilege.
--
-- Guarantees: one row per (event, reason) of the run.skipped and routine.coalesced rows
-- of runlane.run_events, with how many there are (reason '' when the row has none). The
-- journal is never pruned by any pass, so these are true counters. Read-only; counts
-- only, no text of any run. Security definer so a runlane_worker login, which may not read
-- runlane.run_events, can serve `runlane worker --metrics-port`.
create or replace function runlane.journal_counts()
returns table (event text, reason text, n bigint)
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select e.event, coalesce(e.detail ->> 'reason', '') as reason, count(*) as n
    from runlane.run_events as e
    where e.event in ('run.skipped', 'routine.coalesced')
    group by e.event, coalesce(e.detail ->> 'reason', '')
    order by e.event, reason;
$$;

comment on function runlane.journal_counts() is
'Counts of run.skipped (by reason) and routine.coalesced journal rows, for worker metrics.';

revoke all on function runlane.journal_counts() from public;
grant execute on function runlane.journal_counts() to runlane_worker;
