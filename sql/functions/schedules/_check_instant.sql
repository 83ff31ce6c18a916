-- _check_instant: an instant a caller passes ("now", "after") is one runlane can compute
-- with.
--
-- Guarantees: 22004 for null; 22023 unless it is finite and between 0001-01-01 and
-- 9999-12-31 UTC. Within those years every slot, week and window runlane derives stays
-- inside PostgreSQL's range, so no caller sees 22008 (datetime field overflow) from deep
-- inside a computation. p_what names the argument in the message.
create or replace function runlane._check_instant(p_what text, p_at timestamptz)
returns void
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_at is null then
        raise exception 'an instant (%) is required', p_what
            using errcode = '22004';
    end if;
    if not isfinite(p_at)
       or p_at < '0001-01-01 00:00:00+00'::timestamptz
       or p_at >= '10000-01-01 00:00:00+00'::timestamptz then
        raise exception '% % is out of range', p_what, p_at
            using errcode = '22023',
                  hint = 'An instant is finite and between the years 1 and 9999.';
    end if;
end;
$$;

comment on function runlane._check_instant(text, timestamptz) is
'22004 null instant; 22023 unless finite and within the years 1..9999.';

revoke all on function runlane._check_instant(text, timestamptz) from public;
