-- _queue_delay: the one rule of a delayed queue, shared by queue_delay (the maintenance
-- leader's, every organization) and queue_delay_status (the dashboard's, scoped).
--
-- Guarantees: exactly one row: how many interactive-class runs (claim_class 0: chat,
-- manual, test and their retries, in any lane) are queued and have been due for at least
-- p_threshold, measured from the later of creation and wake time, and the oldest such
-- wait in ms; (0, null) when none. Only runs of organization p_org_id when it is given,
-- every organization's when it is NULL. Arguments are checked by the callers. Read-only.
create or replace function runlane._queue_delay(
    p_threshold interval, p_now timestamptz, p_org_id text
) returns table (delayed_runs int, oldest_wait_ms bigint)
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
begin
    -- (PL/pgSQL, not SQL: Citus plans no SQL function's parameterized query; here one
    -- organization's count reaches only its node)
    return query
    select
        count(*)::int,
        floor(extract(epoch from (p_now - min(greatest(r.created_at, r.wake_at)))) * 1000)::bigint
    from runlane.runs as r
    where r.state = 'queued'
      and r.claim_class = 0
      -- greatest() ignores a null wake_at: a run without one waits from its creation.
      and greatest(r.created_at, r.wake_at) <= p_now - p_threshold
      and (p_org_id is null or r.org_id = p_org_id);
end;
$$;

comment on function runlane._queue_delay(interval, timestamptz, text) is
'Count and oldest wait of interactive-class runs due and queued for at least p_threshold, '
'of one organization or (NULL) all.';

revoke all on function runlane._queue_delay(interval, timestamptz, text) from public;
