-- _notify: every notification runlane sends goes through here (runlane_runs and
-- runlane_outputs); no other runlane function calls pg_notify. The array form sends a
-- batch's notifications (one per payload, in order) after one reading of the queue.
--
-- Guarantees:
-- * Never the reason a runlane write fails at COMMIT. A notification is queued in memory
--   here and written to the server's notification queue at commit; the only commit-time
--   failure is a full queue (54000 "too many notifications in the NOTIFY queue", 8 GB in
--   PostgreSQL 15, filled only while a listener sits in one transaction for a long time).
--   So nothing is queued once runlane.notify_queue_usage() reaches
--   runlane.notify_queue_cutoff() (0.5, where workers also read it): the other half
--   cannot fill up between this check and the caller's commit (a commit adds at most its
--   own notifications, a few kB). Returns false then, true when the notification was queued.
-- * Notifications are hints: a skipped one costs a listener its wake-up, never data. Run
--   notifications are recovered by the dispatchers' periodic scan (--scan-interval),
--   output notifications by readers paging with outputs_since.
create or replace function runlane._notify(p_channel text, p_payload text)
returns boolean
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if runlane.notify_queue_usage() >= runlane.notify_queue_cutoff() then
        return false;  -- GUARD: a half-full queue could fail our COMMIT; skip the hint
    end if;
    perform pg_notify(p_channel, p_payload);
    return true;
end;
$$;

comment on function runlane._notify(text, text) is
'pg_notify unless the NOTIFY queue is half full (then false): a notification never fails a COMMIT.';

revoke all on function runlane._notify(text, text) from public;

-- The array form: all of p_payloads or none, by the same rule, the queue read once.
create or replace function runlane._notify(p_channel text, p_payloads text[])
returns boolean
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if runlane.notify_queue_usage() >= runlane.notify_queue_cutoff() then
        return false;  -- GUARD: a half-full queue could fail our COMMIT; skip the hints
    end if;
    perform pg_notify(p_channel, p.payload) from unnest(p_payloads) as p (payload);
    return true;
end;
$$;

comment on function runlane._notify(text, text[]) is
'pg_notify of each payload unless the NOTIFY queue is half full (then none, and false).';

revoke all on function runlane._notify(text, text[]) from public;
