-- _next_slot: the first slot of a parsed schedule strictly after p_after (null for manual).
--
-- Calendar slots (daily, weekly) are wall-clock times in p_timezone, turned into instants
-- by runlane._wall_to_instant (nonexistent -> after the gap, ambiguous -> first instance),
-- so each local day holds at most one daily slot. Interval slots are exact elapsed hours
-- on the grid anchor + k * N hours (anchor = when the schedule was set; the Unix epoch
-- when there is none), untouched by DST. p_spec is the output of runlane.parse_schedule.
create or replace function runlane._next_slot(
    p_spec jsonb,
    p_timezone text,
    p_after timestamptz,
    p_anchor timestamptz
)
returns timestamptz
language plpgsql
stable
parallel safe
set search_path = pg_catalog, pg_temp
as $$
declare
    v_kind text := p_spec ->> 'kind';
    v_step_s numeric;
    v_anchor timestamptz;
    v_time interval;
    v_day date;
    v_slot timestamptz;
begin
    if v_kind = 'interval' then
        v_step_s := (p_spec ->> 'hours')::int * 3600;
        v_anchor := coalesce(p_anchor, 'epoch'::timestamptz);
        return v_anchor + make_interval(
            secs => ((floor(extract(epoch from p_after - v_anchor) / v_step_s) + 1) * v_step_s)::float8
        );
    elsif v_kind in ('daily', 'weekly') then
        v_time := make_interval(hours => (p_spec ->> 'hour')::int, mins => (p_spec ->> 'minute')::int);
        -- the day before p_after's local day covers a slot pushed past midnight by a gap
        v_day := (p_after at time zone p_timezone)::date - 1;
        for i in 0..9 loop
            if v_kind = 'daily'
               or (p_spec -> 'isodows') @> to_jsonb(extract(isodow from v_day + i)::int) then
                v_slot := runlane._wall_to_instant((v_day + i) + v_time, p_timezone);
                if v_slot > p_after then
                    return v_slot;
                end if;
            end if;
        end loop;
        raise exception 'no slot found for schedule % after %', p_spec ->> 'canonical', p_after
            using errcode = 'XX000';
    end if;
    return null;
end;
$$;

comment on function runlane._next_slot(jsonb, text, timestamptz, timestamptz) is
'First slot of a parsed schedule strictly after p_after: wall-clock calendar slots, anchored hour grid.';

revoke all on function runlane._next_slot(jsonb, text, timestamptz, timestamptz) from public;
