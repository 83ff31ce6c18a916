-- _late_notice: what claim_runs tells an agent whose timer run starts late.
--
-- Guarantees: null unless p_run is a marked timer run (timer_routine, timer_occurrence)
-- whose first_started_at is MORE than 15 minutes after its occurrence (exactly 15 minutes
-- is on time). Otherwise both times formatted in the routine's zone with its
-- abbreviation, e.g. {"scheduled_for": "2026-03-29 09:00 CEST", "started_at":
-- "2026-03-29 11:20 CEST", "timezone": "Europe/Berlin", "late_by_minutes": 140}.
-- The function's own SET clause restores the session TimeZone on exit.
create or replace function runlane._late_notice(p_run runlane.runs)
returns jsonb
language plpgsql
set search_path = pg_catalog, pg_temp
set timezone = 'UTC'
as $$
declare
    v_tz text := coalesce((p_run).timer_timezone, 'UTC');
begin
    if (p_run).timer_routine is null or (p_run).timer_occurrence is null
       or (p_run).first_started_at is null
       or (p_run).first_started_at - (p_run).timer_occurrence <= interval '15 minutes' then
        return null;
    end if;
    perform set_config('timezone', v_tz, true);
    return jsonb_build_object(
        'scheduled_for', to_char((p_run).timer_occurrence, 'YYYY-MM-DD HH24:MI TZ'),
        'started_at', to_char((p_run).first_started_at, 'YYYY-MM-DD HH24:MI TZ'),
        'timezone', v_tz,
        'late_by_minutes',
        floor(extract(epoch from (p_run).first_started_at - (p_run).timer_occurrence) / 60)::int
    );
end;
$$;

comment on function runlane._late_notice(runlane.runs) is
'Late-start notice for a timer run started more than 15 minutes after its occurrence, in the routine''s zone.';

revoke all on function runlane._late_notice(runlane.runs) from public;
