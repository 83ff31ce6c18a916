-- notify_queue_usage: the fraction (0 to 1) of the server's NOTIFY queue in use.
--
-- Guarantees: returns pg_notification_queue_usage(). It is the one reading every runlane
-- notification is guarded by (runlane._notify skips its notification from 0.5 on) and the
-- one the maintenance leader logs as notify.queue_usage (from 0.25 on, by default), so
-- both always see the same number. The queue fills only while some session LISTENs and
-- keeps one transaction open for a long time: it cannot drop notifications older than
-- that transaction. Granted to both roles: workers and readers of streams (runlane_api)
-- poll at a short interval instead of waiting for notifications while it is high.
create or replace function runlane.notify_queue_usage()
returns double precision
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    return pg_notification_queue_usage();
end;
$$;

comment on function runlane.notify_queue_usage() is
'Fraction of the server''s NOTIFY queue in use (runlane sends no notification from 0.5 on).';

revoke all on function runlane.notify_queue_usage() from public;
grant execute on function runlane.notify_queue_usage() to runlane_worker;
grant execute on function runlane.notify_queue_usage() to runlane_api;
