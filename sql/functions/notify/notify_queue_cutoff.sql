-- notify_queue_cutoff: the NOTIFY queue reading (runlane.notify_queue_usage()) from which
-- runlane sends no notification at all.
--
-- Guarantees: one number, 0.5, read by runlane._notify (which skips every notification
-- from it on, so a half-full queue can never fail a commit) and by workers (which scan
-- fast from it on whatever their warning level, since nothing will be announced). Kept in
-- one place so the two never disagree. Immutable: a caller's cached plan folds it to a
-- constant, so _notify pays nothing for asking.
create or replace function runlane.notify_queue_cutoff()
returns double precision
language sql
immutable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select 0.5::float8;
$$;

comment on function runlane.notify_queue_cutoff() is
'The NOTIFY queue reading (0.5) from which runlane sends no notification.';

revoke all on function runlane.notify_queue_cutoff() from public;
grant execute on function runlane.notify_queue_cutoff() to runlane_worker;
