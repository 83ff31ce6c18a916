-- unserved_handlers: the handlers with queued runs that no live worker serves, for
-- `runlane status` and the dashboard.
--
-- Guarantees: one row per (handler, lane) with queued runs where no worker registered in
-- the last 2 minutes (runlane.workers, not stopped) serves both that lane and that
-- handler; a worker that registered no handlers (one of 0.2 or before) serves any.
--   queued              the (handler, lane)'s queued runs (awake or not);
--   oldest_wait_ms      how long its oldest awake run has waited, from the later of its
--                       creation and its wake time, or NULL (such runs still count in
--                       queue_delay's warning).
-- Read-only; counts only, no text. A login scoped to an organization (runlane._api_org)
-- sees its organization's runs only. Reads the queued runs once, grouped by
-- runs_handler_claim_order_idx's leading columns.
create or replace function runlane.unserved_handlers(p_now timestamptz default now())
returns table (handler text, lane text, queued int, oldest_wait_ms bigint)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
set jit = off
as $$
#variable_conflict use_column
declare
    v_org text := runlane._api_org();  -- a scoped login counts its organization's runs only
begin
    if p_now is null then
        raise exception 'unserved_handlers needs an instant' using errcode = '22004';
    end if;
    perform runlane._check_instant('now', p_now);
    if to_regclass('runlane.runs_handler_claim_order_idx') is null then
        return;  -- (a schema before 0021: every run is of handler 'default', served by all)
    end if;

    return query
    select
        q.handler,
        q.lane,
        q.queued::int,
        runlane._ms_between(q.oldest_due, p_now)
    from (
        select
            r.handler,
            r.lane,
            count(*) as queued,
            min(greatest(r.created_at, r.wake_at)) filter (
                where coalesce(r.wake_at, r.created_at) <= p_now
            ) as oldest_due
        from runlane.runs as r
        where r.state = 'queued'
          and (v_org is null or r.org_id = v_org)
        group by r.handler, r.lane
    ) as q
    where not exists (
        select 1
        from runlane.workers as w
        where w.stopped_at is null
          and w.heartbeat_at > p_now - interval '2 minutes'
          and w.deliveries = 'direct'
          and q.lane = any(w.lanes)
          and (w.handlers is null or q.handler = any(w.handlers))
    )
    order by q.handler, q.lane;
end;
$$;

comment on function runlane.unserved_handlers(timestamptz) is
'Per handler and lane with queued runs that no live worker serves: its queued runs and the '
'oldest awake one''s wait in ms.';

revoke all on function runlane.unserved_handlers(timestamptz) from public;
grant execute on function runlane.unserved_handlers(timestamptz) to runlane_worker, runlane_api;
