-- _late_notice: what claim_runs tells an agent whose timer run starts late.
--
-- Guarantees: null unless p_run is a marked timer run (timer_routine, timer_occurrence)
-- with a first_started_at. Its occurrence is the most recent occurrence of the routine
-- due at that start, the one tick would have coalesced the pending run into (never
-- earlier than the marker): runlane._last_slot of the agent's schedule, in the agent's
-- zone (owner's, else organization's). So a run claimed right after downtime, before
-- tick moved its marker, is measured against the slot actually due (20 minutes ago), not
-- the stale one (200 minutes ago). When that occurrence is later than the marker, the
-- marker moves with it (timer_occurrence, timer_timezone), and the agent's next_run_at,
-- when it still points at or before that occurrence, advances to the first slot after
-- the start, as tick's coalescing would have done: tick never fires, nor skips, the
-- occurrence this run took. Both moves are best effort and never fail or block the
-- claim: the agent row is skipped when another transaction holds it (a concurrent tick),
-- and the marker stays when another run already holds that occurrence (unique index).
-- A manual schedule (or an agent gone) leaves the marker as it is.
-- Null when the start is at most 15 minutes after the occurrence (exactly 15 minutes is
-- on time); otherwise both times formatted in the routine's zone with its abbreviation,
-- e.g. {"scheduled_for": "2026-03-29 09:00 CEST", "started_at": "2026-03-29 11:20 CEST",
-- "timezone": "Europe/Berlin", "late_by_minutes": 140}.
-- Only claim_runs calls it, on the runs it has just claimed (their rows are its own).
-- The function's own SET clause restores the session TimeZone on exit.
create or replace function runlane._late_notice(p_run runlane.runs)
returns jsonb
language plpgsql
set search_path = pg_catalog, pg_temp
set timezone = 'UTC'
as $$
declare
    v_tz text := coalesce((p_run).timer_timezone, 'UTC');
    v_occurrence timestamptz := (p_run).timer_occurrence;
    v_started timestamptz := (p_run).first_started_at;
    v_agent runlane.agents;
    v_spec jsonb;
    v_agent_tz text;
    v_due timestamptz;
begin
    if (p_run).timer_routine is null or v_occurrence is null or v_started is null then
        return null;
    end if;

    -- GUARD: the occurrence actually due at the start (what tick would coalesce into)
    select a.* into v_agent
    from runlane.agents as a
    where a.agent_id = (p_run).timer_routine and a.org_id = (p_run).org_id;
    if found and v_agent.schedule <> '' then
        v_spec := runlane.parse_schedule(v_agent.schedule);
        v_agent_tz := runlane._agent_timezone(v_agent.owner_id, v_agent.org_id);
        v_due := runlane._last_slot(v_spec, v_agent_tz, v_started, v_agent.schedule_anchor);
        if v_due > v_occurrence then
            v_occurrence := v_due;
            v_tz := v_agent_tz;
            begin
                update runlane.runs as r
                set timer_occurrence = v_due, timer_timezone = v_agent_tz
                where r.run_id = (p_run).run_id and r.org_id = (p_run).org_id
                  and r.timer_occurrence < v_due;
                perform 1
                from runlane.agents as a
                where a.agent_id = v_agent.agent_id and a.org_id = v_agent.org_id and a.next_run_at <= v_due
                for no key update skip locked;
                if found then
                    update runlane.agents as a
                    set next_run_at = runlane._next_slot(v_spec, v_agent_tz, v_started, v_agent.schedule_anchor)
                    where a.agent_id = v_agent.agent_id and a.org_id = v_agent.org_id;
                end if;
            exception
                when unique_violation or lock_not_available then
                    null;  -- another run holds that occurrence, or its row is busy: keep the marker
            end;
        end if;
    end if;

    if v_started - v_occurrence <= interval '15 minutes' then
        return null;
    end if;
    perform set_config('timezone', v_tz, true);
    return jsonb_build_object(
        'scheduled_for', to_char(v_occurrence, 'YYYY-MM-DD HH24:MI TZ'),
        'started_at', to_char(v_started, 'YYYY-MM-DD HH24:MI TZ'),
        'timezone', v_tz,
        'late_by_minutes', floor(extract(epoch from v_started - v_occurrence) / 60)::int
    );
end;
$$;

comment on function runlane._late_notice(runlane.runs) is
'Late-start notice for a timer run started more than 15 minutes after the routine''s most recent occurrence '
'due at its start (marker moved to it), in the routine''s zone.';

revoke all on function runlane._late_notice(runlane.runs) from public;
