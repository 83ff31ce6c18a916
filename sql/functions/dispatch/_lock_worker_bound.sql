-- _lock_worker_bound: locks the worker's bound row, so the bounded claims of one worker's
-- lanes take turns.
--
-- Guarantees: locks p_worker's row of runlane.claim_receipts with lanes '{}' (creating it
-- on the worker's first bounded claim) until the caller's transaction ends. Each lane of a
-- worker claims on its own connection, and a claim counts the worker's running runs
-- without another lane's uncommitted claim: two lanes claiming at once could each fill an
-- organization's room under runlane.max_per_org. A claim that holds this row counts, in
-- its later statements, whatever claim of the worker committed while it waited. Only
-- that worker's bounded claims wait for it; a concurrent first claim inserting the row
-- makes the insert wait for it, then do nothing.
create or replace function runlane._lock_worker_bound(p_worker text)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    perform 1
    from runlane.claim_receipts as c
    where c.worker_id = p_worker and c.lanes = '{}'
    for update;
    if not found then
        insert into runlane.claim_receipts as c (worker_id, lanes, claim_key)
        values (p_worker, '{}', gen_random_uuid())
        on conflict (worker_id, lanes) do nothing;
        if not found then
            perform 1
            from runlane.claim_receipts as c
            where c.worker_id = p_worker and c.lanes = '{}'
            for update;
        end if;
    end if;
end;
$$;

comment on function runlane._lock_worker_bound(text) is
'Locks the worker''s bound row in claim_receipts (lanes ''{}''), creating it on first use: its '
'bounded claims take turns across its lanes.';

revoke all on function runlane._lock_worker_bound(text) from public;
