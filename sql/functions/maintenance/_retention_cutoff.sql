-- _retention_cutoff: the instant before which runlane.purge_finished may delete finished
-- runs, when p_now is the current time: p_now - p_older_than.
--
-- Guarantees: returns that instant when it lies at least 8 days before p_now; otherwise
-- 22023, naming the window and the instant it reaches back to. The instant is compared,
-- not the interval: interval comparison counts a month as 30 days and a day as 24 hours,
-- so a window such as '1 mon -22 days' compares as 8 days but in March reaches back only
-- 6 days, and '1 year -360 days' reaches back 5 or 6. Eight days back lies before the
-- start of any owner's current week (a week is at most 169 hours long), so every charge a
-- purge deletes (made before its run finished) is outside every current week and
-- weekly_spend stays exact. A negative or empty window, whatever its parts, reaches back
-- less than 8 days and is refused the same way. 22004 for a null argument; 22008 never
-- escapes: a window that leaves the timestamp range is 22023 as well.
create or replace function runlane._retention_cutoff(p_older_than interval, p_now timestamptz)
returns timestamptz
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_cutoff timestamptz;
begin
    if p_older_than is null or p_now is null then
        raise exception 'a retention window and the current time are required'
            using errcode = '22004';
    end if;
    begin
        v_cutoff := p_now - p_older_than;
    exception when datetime_field_overflow then
        v_cutoff := null;
    end;
    if v_cutoff is null or not isfinite(v_cutoff) or v_cutoff > p_now - interval '8 days' then
        raise exception 'retention window % reaches back only to %, less than 8 days',
            p_older_than, coalesce(v_cutoff::text, 'beyond the timestamp range')
            using errcode = '22023',
                  hint = 'Purge only runs finished at least 8 days ago, so weekly budgets stay exact.';
    end if;
    return v_cutoff;
end;
$$;

comment on function runlane._retention_cutoff(interval, timestamptz) is
'p_now - p_older_than when that instant is at least 8 days before p_now; else 22023 '
'(the instant is compared, not the interval, whose months count 30 days).';

revoke all on function runlane._retention_cutoff(interval, timestamptz) from public;
