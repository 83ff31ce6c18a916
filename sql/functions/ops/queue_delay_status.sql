-- queue_delay_status: the queue-delay warning as the dashboard shows it.
--
-- Guarantees: exactly one row: delayed_runs and oldest_wait_ms by the rule of
-- runlane.queue_delay (interactive-class runs, any lane, due and queued for at least
-- p_threshold, from the later of creation and wake time: runlane._queue_delay), and
-- threshold_ms, the threshold it was judged by. The warning is active when delayed_runs
-- > 0. A login scoped to an organization (runlane._api_org) counts that organization's
-- runs only (queue_delay, the maintenance leader's, counts every organization's and is the
-- worker's alone). 22004 for a null argument, 22023 for a negative threshold or an
-- infinite instant. Read-only; counts only. The queue is read as an index-only scan of
-- runs_unfinished_lane_idx (migration 0012).
create or replace function runlane.queue_delay_status(
    p_threshold interval default '30 seconds',
    p_now timestamptz default now()
) returns table (delayed_runs int, oldest_wait_ms bigint, threshold_ms bigint)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
-- a read of milliseconds, asked every second while someone watches: never JIT-compiled
-- (on a long enough queue its estimated cost passes jit_above_cost; compiling a
-- dashboard read took 770 ms)
set jit = off
as $$
declare
    v_org text := runlane._api_org();  -- first: a scoped login counts its organization only
begin
    if p_threshold is null or p_now is null then
        raise exception 'queue_delay_status needs a threshold and an instant'
            using errcode = '22004';
    end if;
    if p_threshold < interval '0' or p_threshold > interval '1 year' then
        raise exception 'the threshold must be between 0 and 1 year, got %', p_threshold
            using errcode = '22023';
    end if;
    perform runlane._check_instant('now', p_now);

    return query
    select d.delayed_runs, d.oldest_wait_ms,
           floor(extract(epoch from p_threshold) * 1000)::bigint
    from runlane._queue_delay(p_threshold, p_now, v_org) as d;
end;
$$;

comment on function runlane.queue_delay_status(interval, timestamptz) is
'The queue-delay warning, scoped to the login''s organization: interactive-class runs due and '
'queued for at least p_threshold, the oldest wait, and the threshold in ms.';

revoke all on function runlane.queue_delay_status(interval, timestamptz) from public;
grant execute on function runlane.queue_delay_status(interval, timestamptz) to runlane_worker, runlane_api;
