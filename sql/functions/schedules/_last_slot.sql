-- _last_slot: the most recent slot of a parsed schedule at or before p_at (null for
-- manual); the mirror image of runlane._next_slot, with the same wall-clock and grid
-- rules. tick uses it to name the occurrence a due agent fires for.
create or replace function runlane._last_slot(
    p_spec jsonb,
    p_timezone text,
    p_at timestamptz,
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
            secs => (floor(extract(epoch from p_at - v_anchor) / v_step_s) * v_step_s)::float8
        );
    elsif v_kind in ('daily', 'weekly') then
        v_time := make_interval(hours => (p_spec ->> 'hour')::int, mins => (p_spec ->> 'minute')::int);
        v_day := (p_at at time zone p_timezone)::date + 1;
        for i in 0..9 loop
            if v_kind = 'daily'
               or (p_spec -> 'isodows') @> to_jsonb(extract(isodow from v_day - i)::int) then
                v_slot := runlane._wall_to_instant((v_day - i) + v_time, p_timezone);
                if v_slot <= p_at then
                    return v_slot;
                end if;
            end if;
        end loop;
        raise exception 'no slot found for schedule % before %', p_spec ->> 'canonical', p_at
            using errcode = 'XX000';
    end if;
    return null;
end;
$$;

comment on function runlane._last_slot(jsonb, text, timestamptz, timestamptz) is
'Most recent slot of a parsed schedule at or before p_at (the occurrence a due agent fires for).';

revoke all on function runlane._last_slot(jsonb, text, timestamptz, timestamptz) from public;
