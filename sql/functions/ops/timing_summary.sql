-- timing_summary: latency distributions over a recent window, for `runlane timing`.
--
-- Guarantees: three rows, always, in this order, each over runs with p_trigger (all
-- triggers when NULL), of the login's organization when it is scoped to one
-- (runlane._api_org):
--   queue_wait      run.queue_wait_ms of each run whose first execution start lies in
--                   the window (creation -> first_started_at);
--   first_response  run.first_response_ms of each run whose first visible output lies
--                   in the window: one sample per run, from its persisted first-response
--                   time (never reset by retries), origin = source message or creation;
--   total           run.total_ms of each run that ended in the window (succeeded,
--                   failed or canceled; skipped runs never ran and are not samples).
-- The window is (p_now - p_since, p_now]. Each run contributes at most one sample per
-- measure, taken from its own record for that measure: nothing repeated across
-- lifecycle events is counted twice. Percentiles are percentile_disc (an observed
-- value); with no samples, samples = 0 and the rest is NULL. Read-only.
create or replace function runlane.timing_summary(
    p_since interval default '1 hour',
    p_trigger text default null,
    p_now timestamptz default now()
) returns table (measure text, samples int, p50_ms bigint, p90_ms bigint, p99_ms bigint, max_ms bigint)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_org text := runlane._api_org();  -- a scoped login summarizes its organization only
begin
    if p_since is null or p_now is null then
        raise exception 'timing_summary needs a window and an instant' using errcode = '22004';
    end if;
    perform runlane._check_instant('now', p_now);
    if p_since <= interval '0' or p_since > interval '100 years' then
        raise exception 'the window must be positive and at most 100 years, got %', p_since
            using errcode = '22023';
    end if;
    if p_trigger is not null
       and p_trigger not in ('interactive', 'manual', 'scheduled', 'reaction', 'retry', 'test') then
        raise exception 'unknown trigger %', runlane._quote_for_error(p_trigger)
            using errcode = '22023',
                  hint = 'one of interactive, manual, scheduled, reaction, retry, test';
    end if;

    return query
    with recent as (
        select r.*, coalesce(m.created_at, r.created_at) as origin
        from runlane.runs as r
        left join runlane.messages as m
            on m.message_id = r.source_message_id
            and m.org_id = r.org_id  -- (the whole key: on Citus a join within each node)
        where (p_trigger is null or r.trigger = p_trigger)
          and (v_org is null or r.org_id = v_org)
          and (
              r.first_started_at > p_now - p_since
              or r.first_response_at > p_now - p_since
              or r.finished_at > p_now - p_since
          )
    ),
    samples as (
        select 1 as ord, 'queue_wait' as measure,
               runlane._ms_between(x.created_at, x.first_started_at) as ms
        from recent as x
        where x.first_started_at > p_now - p_since and x.first_started_at <= p_now
        union all
        select 2, 'first_response', runlane._ms_between(x.origin, x.first_response_at)
        from recent as x
        where x.first_response_at > p_now - p_since and x.first_response_at <= p_now
        union all
        select 3, 'total', runlane._ms_between(x.origin, x.finished_at)
        from recent as x
        where x.finished_at > p_now - p_since and x.finished_at <= p_now
          and x.state in ('succeeded', 'failed', 'canceled')
    )
    select
        k.measure,
        count(s.ms)::int,
        percentile_disc(0.5) within group (order by s.ms),
        percentile_disc(0.9) within group (order by s.ms),
        percentile_disc(0.99) within group (order by s.ms),
        max(s.ms)
    from (values (1, 'queue_wait'), (2, 'first_response'), (3, 'total')) as k (ord, measure)
    left join samples as s on s.ord = k.ord
    group by k.ord, k.measure
    order by k.ord;
end;
$$;

comment on function runlane.timing_summary(interval, text, timestamptz) is
'queue_wait, first_response and total distributions (samples, p50, p90, p99, max in ms) over runs '
'of p_trigger in (p_now - p_since, p_now]; one sample per run per measure from its own record.';

revoke all on function runlane.timing_summary(interval, text, timestamptz) from public;
grant execute on function runlane.timing_summary(interval, text, timestamptz) to runlane_worker, runlane_api;
