-- queue_delay: how many interactive-class runs have been due and still queued for at
-- least p_threshold, and how long the oldest of them has waited.
--
-- Interactive-class work is what a person is waiting for, in whichever lane it runs:
-- chat (trigger interactive), "Run now" (manual), test runs and due retries of them
-- (runs.claim_class = 0, the class claim_runs takes first). A manual run held back by
-- the organization's cap in the background lane counts like a chat run. Scheduled and
-- reaction work (claim_class 1) never counts: nobody is watching it start. The wait of a
-- run is measured from the later of its creation and its wake time, so normal retry
-- backoff does not count, and runs whose wake time is still in the future (future
-- retries) never do (the rule lives in runlane._queue_delay, shared with the dashboard's
-- queue_delay_status). Always returns exactly one row: (0, null) when nothing is delayed.
-- Read-only; the runner's maintenance leader calls it every 30 s to log
-- run.queue_delayed / run.queue_recovered.
create or replace function runlane.queue_delay(
    p_threshold interval default '30 seconds',
    p_now timestamptz default now()
) returns table (delayed_runs int, oldest_wait_ms bigint)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_threshold is null or p_now is null then
        raise exception 'queue_delay needs a threshold and a time'
            using errcode = '22004';
    end if;
    if p_threshold < interval '0' then
        raise exception 'queue_delay threshold must not be negative, got %', p_threshold
            using errcode = '22023';
    end if;
    perform runlane._check_instant('now', p_now);

    return query
    select d.delayed_runs, d.oldest_wait_ms
    from runlane._queue_delay(p_threshold, p_now, null) as d;  -- every organization
end;
$$;

comment on function runlane.queue_delay(interval, timestamptz) is
'Interactive-class runs (chat, manual, test, retry; any lane) due and queued for at least p_threshold '
'(from the later of creation and wake time): their count and the oldest wait in ms.';

revoke all on function runlane.queue_delay(interval, timestamptz) from public;
grant execute on function runlane.queue_delay(interval, timestamptz) to runlane_worker;
