-- _wall_to_instant: a local wall-clock time in a zone, as the instant our rules choose.
--
-- PostgreSQL's own `timestamp at time zone` resolves an ambiguous wall time (fall back)
-- to the later instant; we need the first. So both offsets in force around the wall time
-- (a day either side) are tried explicitly:
--   * ambiguous (both offsets valid): the first instance, with the larger offset
--     (Europe/Berlin 2026-10-25 02:30 -> 00:30 UTC);
--   * nonexistent (spring-forward gap, neither valid): the wall time read with the offset
--     in force before the gap, i.e. shifted forward by the gap's length
--     (Europe/Berlin 2026-03-29 02:30 -> 01:30 UTC = 03:30 CEST);
--   * otherwise the one valid instant.
-- Independent of the session TimeZone (only fixed-length intervals are added).
create or replace function runlane._wall_to_instant(p_wall timestamp, p_timezone text)
returns timestamptz
language plpgsql
stable
parallel safe
set search_path = pg_catalog, pg_temp
as $$
declare
    v_naive timestamptz := p_wall at time zone 'UTC';
    v_before timestamptz := v_naive - interval '24 hours';
    v_after timestamptz := v_naive + interval '24 hours';
    v_offset_before interval := (v_before at time zone p_timezone) - (v_before at time zone 'UTC');
    v_offset_after interval := (v_after at time zone p_timezone) - (v_after at time zone 'UTC');
    v_first timestamptz := v_naive - greatest(v_offset_before, v_offset_after);
begin
    if (v_first at time zone p_timezone) = p_wall then
        return v_first;
    end if;
    return v_naive - least(v_offset_before, v_offset_after);
end;
$$;

comment on function runlane._wall_to_instant(timestamp, text) is
'Local wall time -> instant: first instance when ambiguous, shifted by the gap when nonexistent.';

revoke all on function runlane._wall_to_instant(timestamp, text) from public;
