-- _notify_run: a hint on channel runlane_runs that a run may be claimable.
--
-- Notifications are hints only (the scan recovers anything missed), so the payload is
-- ids and lane, never text. Delivered at commit of the caller's transaction.
create or replace function runlane._notify_run(p_run_id bigint, p_lane text)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    -- PL/pgSQL, not SQL: a SQL function with a pinned search_path is never inlined and
    -- is planned again on every call; PL/pgSQL keeps its plan (once per published run).
    perform pg_notify(
        'runlane_runs',
        json_build_object('run_id', p_run_id, 'lane', p_lane)::text
    );
end;
$$;

comment on function runlane._notify_run(bigint, text) is
'Publishes {run_id, lane} on runlane_runs (a hint; the periodic scan recovers misses).';

revoke all on function runlane._notify_run(bigint, text) from public;
