-- _notify_run: a hint on channel runlane_runs that a run may be claimable.
--
-- Notifications are hints only (the scan recovers anything missed), so the payload is
-- ids and lane, never text. Delivered at commit of the caller's transaction. Sent through
-- runlane._notify: skipped while the NOTIFY queue is half full, so it never fails the
-- caller's COMMIT (publish_run, release_run, retry_run, reap_stale, finishes that wake a
-- computer waiter or hand held messages on).
create or replace function runlane._notify_run(p_run_id bigint, p_lane text)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    -- PL/pgSQL, not SQL: a SQL function with a pinned search_path is never inlined and
    -- is planned again on every call; PL/pgSQL keeps its plan (once per published run).
    perform runlane._notify(
        'runlane_runs',
        json_build_object('run_id', p_run_id, 'lane', p_lane)::text
    );
end;
$$;

comment on function runlane._notify_run(bigint, text) is
'Publishes {run_id, lane} on runlane_runs (a hint; the periodic scan recovers misses; '
'skipped while the NOTIFY queue is half full).';

revoke all on function runlane._notify_run(bigint, text) from public;
