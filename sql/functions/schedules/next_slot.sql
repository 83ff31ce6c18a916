-- next_slot: the first slot of a schedule strictly after p_after, in UTC (timestamptz).
--
-- Guarantees: calendar slots are wall-clock times in p_timezone; a wall time that does
-- not exist (spring forward) fires at the same offset after the gap (02:30 -> 03:30); an
-- ambiguous one (fall back) fires once, at its first instance. Interval schedules are
-- exact elapsed hours on a fixed grid (anchored at the Unix epoch here; agents use the
-- anchor set with their schedule, see runlane._next_slot). Manual ('') -> null.
-- "weekly at HH:MM" is read as if set at p_after: the weekday of p_after in p_timezone.
-- Raises RL006 for an invalid schedule, RL007 for a zone that is not a name of
-- pg_timezone_names (runlane._is_timezone, as the settings triggers: no abbreviations
-- or POSIX strings), 22023 for an instant outside the years 1..9999. Security definer
-- only so callers need no grant on the private helpers it uses; it reads no table.
create or replace function runlane.next_slot(p_schedule text, p_timezone text, p_after timestamptz)
returns timestamptz
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    -- parsed first, so an invalid schedule is RL006 whatever the other arguments
    v_spec jsonb := runlane._parse_schedule(p_schedule, 'UTC', now());
begin
    if p_timezone is null or p_after is null then
        raise exception 'next_slot needs a time zone and an instant'
            using errcode = '22004';
    end if;
    if not isfinite(p_after) then
        raise exception 'next_slot needs a finite instant, not %', p_after
            using errcode = '22023';
    end if;
    perform runlane._check_instant('after', p_after);
    -- The zone check of the settings triggers: abbreviations ('CEST') and POSIX strings
    -- ('UTC+3', which means UTC-3) are refused like unknown names.
    if not runlane._is_timezone(p_timezone) then
        raise exception 'invalid time zone %', runlane._quote_for_error(p_timezone)
            using errcode = 'RL007',
                  hint = 'Use an IANA zone name such as Europe/Berlin (see pg_timezone_names; localtime, '
                      || 'posixrules, Factory and posix/ or right/ names are not zones).';
    end if;
    if v_spec ->> 'kind' = 'weekly' then  -- "weekly at HH:MM": p_after's weekday in the zone
        v_spec := runlane._parse_schedule(p_schedule, p_timezone, p_after);
    end if;
    return runlane._next_slot(v_spec, p_timezone, p_after, null);
end;
$$;

comment on function runlane.next_slot(text, text, timestamptz) is
'First slot of a schedule strictly after p_after: DST-correct wall-clock slots, exact-hour intervals.';

revoke all on function runlane.next_slot(text, text, timestamptz) from public;
grant execute on function runlane.next_slot(text, text, timestamptz) to runlane_api, runlane_worker;
