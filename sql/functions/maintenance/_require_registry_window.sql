-- _require_registry_window: the arguments of a retention call over the worker registry
-- (purge_stale_claim_receipts, purge_gone_workers), checked once for both; returns the
-- cutoff instant, now() - p_older_than.
--
-- Guarantees: 22004 for a null window or limit; 22023 for a window under 1 hour (a live
-- worker refreshes its registry row every 30 seconds, so an hour of silence is never a
-- live one) or a limit outside 1 .. 10000. p_rows names what the caller deletes, for the
-- messages.
create or replace function runlane._require_registry_window(
    p_rows text, p_older_than interval, p_limit int
)
returns timestamptz
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_older_than is null or p_limit is null then
        raise exception 'older_than and limit are required'
            using errcode = '22004';
    end if;
    if p_older_than < interval '1 hour' then
        raise exception 'a % window of % is shorter than 1 hour', p_rows, p_older_than
            using errcode = '22023',
                  hint = format('Delete only the %s of workers silent for at least an hour.', p_rows);
    end if;
    if p_limit < 1 or p_limit > 10000 then
        raise exception 'limit % is out of range', p_limit
            using errcode = '22023',
                  hint = format('Delete between 1 and 10000 %s per call.', p_rows);
    end if;
    return now() - p_older_than;
end;
$$;

comment on function runlane._require_registry_window(text, interval, int) is
'Checks a worker-registry retention call''s window (at least 1 hour) and limit (1-10000); '
'returns the cutoff instant.';

revoke all on function runlane._require_registry_window(text, interval, int) from public;
