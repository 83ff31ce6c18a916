-- _parse_schedule: the one parser of agents.schedule, given where and when it is set.
--
-- Guarantees: returns the normalized schedule as jsonb with its canonical text under
-- "canonical" and its kind under "kind" (manual, interval, daily, weekly), or raises RL006
-- with a HINT listing the accepted forms. Case and spacing are free; anything else
-- (raw cron, event triggers, out-of-range numbers, whitespace-only text) is refused.
--   ''                                  {"kind": "manual", "canonical": ""}
--   every N hours | every hour          {"kind": "interval", "hours": N, ...}      1 <= N <= 720
--   daily at HH:MM | every day at HH:MM {"kind": "daily", "hour", "minute", "time", ...}
--   weekly on mon[,tue...] at HH:MM     {"kind": "weekly", "days", "isodows", "hour", ...}
--   weekly at HH:MM                     the weekday of p_set_at in p_timezone: set on a
--                                       Thursday there, it is "weekly on thu at HH:MM"
-- The result of a "weekly at" text is exactly the result of its canonical text, so the
-- stored canonical text keeps its day whenever and wherever it is parsed again. p_timezone
-- must be a valid zone (callers pass a checked one); only "weekly at" reads the two.
create or replace function runlane._parse_schedule(
    p_schedule text,
    p_timezone text,
    p_set_at timestamptz
)
returns jsonb
language plpgsql
stable
parallel safe
set search_path = pg_catalog, pg_temp
as $$
declare
    c_hint constant text :=
        'Accepted forms (case and spacing free): '''' (manual only), "every N hours" or '
        || '"every hour" (1 <= N <= 720), "daily at HH:MM" or "every day at HH:MM", "weekly on mon[,tue,...] at HH:MM" '
        || '(days mon tue wed thu fri sat sun, HH:MM from 00:00 to 23:59), "weekly at HH:MM" '
        || '(the weekday on which it is set, in the schedule''s time zone).';
    c_days constant text[] := array['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
    v_text text;
    v_m text[];
    v_hours int;
    v_hour int;
    v_minute int;
    v_day text;
    v_dows int[] := '{}'::int[];
    v_time text;
begin
    if p_schedule is null then
        raise exception 'a schedule cannot be null; use '''' for a manual-only agent'
            using errcode = 'RL006', hint = c_hint;
    end if;
    if p_schedule = '' then
        return jsonb_build_object('kind', 'manual', 'canonical', '');
    end if;

    -- Long input is refused before any regular expression touches it.
    if length(p_schedule) <= 200 then
        v_text := lower(regexp_replace(p_schedule, '^\s+|\s+$', '', 'g'));
        v_text := regexp_replace(v_text, '\s+', ' ', 'g');
        v_text := regexp_replace(v_text, ' ?, ?', ',', 'g');
        v_text := regexp_replace(v_text, ' ?: ?', ':', 'g');

        -- GUARD: every N hours / every hour
        if v_text = 'every hour' then
            v_hours := 1;
        else
            v_m := regexp_match(v_text, '^every ([0-9]{1,4}) hours?$');
            if v_m is not null then
                v_hours := v_m[1]::int;
            end if;
        end if;
        if v_hours between 1 and 720 then
            return jsonb_build_object(
                'kind', 'interval',
                'hours', v_hours,
                'canonical', case when v_hours = 1 then 'every hour' else format('every %s hours', v_hours) end
            );
        end if;

        -- GUARD: daily at HH:MM / weekly on <days> at HH:MM / weekly at HH:MM
        -- "every day at HH:MM" is said as often as "daily at HH:MM" and means the same.
        v_text := regexp_replace(v_text, '^every day at ', 'daily at ');
        v_m := regexp_match(v_text, '^(daily|weekly|weekly on ([a-z,]+)) at ([0-9]{1,2}):([0-9]{2})$');
        if v_m is not null and v_m[3]::int between 0 and 23 and v_m[4]::int between 0 and 59 then
            v_hour := v_m[3]::int;
            v_minute := v_m[4]::int;
            v_time := lpad(v_hour::text, 2, '0') || ':' || lpad(v_minute::text, 2, '0');
            if v_m[1] = 'daily' then
                return jsonb_build_object(
                    'kind', 'daily', 'hour', v_hour, 'minute', v_minute, 'time', v_time,
                    'canonical', 'daily at ' || v_time
                );
            end if;
            if v_m[1] = 'weekly' then
                -- the weekday on which the schedule is set, in its zone
                if p_timezone is null or p_set_at is null then
                    raise exception '"weekly at HH:MM" needs the zone and the instant it is set at'
                        using errcode = '22004';
                end if;
                v_m[2] := c_days[extract(isodow from p_set_at at time zone p_timezone)::int];
            end if;
            foreach v_day in array string_to_array(v_m[2], ',') loop
                -- three-letter names or the full English day name
                v_day := case
                    when v_day = any(c_days) then v_day
                    when v_day in (
                        'monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'
                    ) then left(v_day, 3)
                end;
                if v_day is null then
                    v_dows := null;
                    exit;
                end if;
                v_dows := v_dows || array_position(c_days, v_day);
            end loop;
            if v_dows is not null and cardinality(v_dows) > 0 then
                select array_agg(distinct d order by d) into v_dows from unnest(v_dows) as d;
                return jsonb_build_object(
                    'kind', 'weekly',
                    'isodows', to_jsonb(v_dows),
                    'days', (select to_jsonb(array_agg(c_days[d] order by d)) from unnest(v_dows) as d),
                    'hour', v_hour, 'minute', v_minute, 'time', v_time,
                    'canonical', format(
                        'weekly on %s at %s',
                        (select string_agg(c_days[d], ',' order by d) from unnest(v_dows) as d),
                        v_time
                    )
                );
            end if;
        end if;
    end if;

    raise exception 'invalid schedule %', quote_literal(left(p_schedule, 40))
        || case when length(p_schedule) > 40 then format(' (%s characters)', length(p_schedule)) else '' end
        using errcode = 'RL006', hint = c_hint;
end;
$$;

comment on function runlane._parse_schedule(text, text, timestamptz) is
'parse_schedule with the zone and instant a schedule is set at: "weekly at HH:MM" becomes the weekly '
'schedule on that instant''s weekday in that zone.';

revoke all on function runlane._parse_schedule(text, text, timestamptz) from public;
