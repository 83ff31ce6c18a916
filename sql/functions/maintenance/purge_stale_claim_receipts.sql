-- purge_stale_claim_receipts: retention of runlane.claim_receipts.
--
-- A receipt lets a worker resend a claim whose reply was lost (claim_runs with the same
-- key returns the same runs); there is one per worker id and lane set, and a worker's id
-- is new with each process, so receipts of workers long gone pile up. This deletes them.
--
-- Guarantees:
-- * Deletes at most p_limit (1 .. 10000) receipts whose last claim (claimed_at) is older
--   than now() - p_older_than and whose worker has no registry row (runlane.workers)
--   refreshed within that window either. A live worker refreshes its row every 30
--   seconds, so its receipts are never deleted; a claim is resent within half a lease
--   of the claim, so no resend ever finds its receipt gone.
-- * A receipt a claim holds (`for update`) is skipped, never waited for; a deleted
--   receipt is created again by the worker's next keyed claim.
-- * Returns the number deleted; p_limit returned means more may be waiting.
-- * p_older_than under 1 hour is refused (22023); 22004 for null arguments; 22023 for a
--   limit out of range.
create or replace function runlane.purge_stale_claim_receipts(
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
begin
    v_cutoff := runlane._require_registry_window('claim receipts', p_older_than, p_limit);

    with stale as (
        select c.worker_id, c.lanes
        from runlane.claim_receipts as c
        where c.claimed_at < v_cutoff
          and not exists (
              select 1 from runlane.workers as w
              where w.worker_id = c.worker_id
                and w.heartbeat_at >= v_cutoff
          )
        order by c.claimed_at
        limit purge_stale_claim_receipts.p_limit
        for update of c skip locked
    ),

    gone as (
        delete from runlane.claim_receipts as c
        using stale as s
        where c.worker_id = s.worker_id and c.lanes = s.lanes
        returning 1
    )

    select count(*)::int into v_purged from gone;
    return v_purged;
end;
$$;

comment on function runlane.purge_stale_claim_receipts(interval, int) is
'Retention: deletes up to p_limit claim receipts whose claim and whose worker''s registry row '
'are both older than now() - p_older_than (at least 1 hour). Returns the count.';

revoke all on function runlane.purge_stale_claim_receipts(interval, int) from public;
grant execute on function runlane.purge_stale_claim_receipts(interval, int) to runlane_worker;
