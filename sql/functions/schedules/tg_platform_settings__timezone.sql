-- tg_platform_settings__timezone: an organization's time zone is a real zone name, and
-- the calendar schedules that fall back to it follow it.
--
-- Guarantees: a timezone that is not a zone name (runlane._is_timezone) raises RL007 and
-- nothing is written.
-- When it changes, every scheduled, gate-open calendar agent of the organization whose
-- owner has no timezone of their own gets next_run_at = its first slot after now() in
-- the new zone.
create or replace function runlane.tg_platform_settings__timezone()
returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_agents text[];
    v_next timestamptz[];
begin
    if not runlane._is_timezone(new.timezone) then
        raise exception 'invalid time zone %', quote_literal(left(coalesce(new.timezone, 'null'), 60))
            using errcode = 'RL007',
                  hint = 'Use an IANA zone name such as Europe/Berlin or UTC (see pg_timezone_names; '
                      || 'localtime, posixrules, Factory and posix/ or right/ names are not zones).';
    end if;

    if tg_op = 'UPDATE' and new.timezone is distinct from old.timezone then
        -- (the next slots are computed by a read, then written by key: Citus calls no
        -- STABLE function on a column inside an UPDATE)
        select
            coalesce(array_agg(a.agent_id), '{}'),
            coalesce(array_agg(
                runlane._next_slot(runlane.parse_schedule(a.schedule), new.timezone, now(), a.schedule_anchor)
            ), '{}')
        into v_agents, v_next
        from runlane.agents as a
        join runlane.users as u on u.user_id = a.owner_id and u.org_id = a.org_id
        where a.org_id = new.org_id
          and u.timezone is null
          and a.next_run_at is not null
          and a.schedule not like 'every %';

        update runlane.agents as a
        set next_run_at = n.next_run_at
        from unnest(v_agents, v_next) as n (agent_id, next_run_at)
        where a.agent_id = n.agent_id and a.org_id = new.org_id;
    end if;
    return new;
end;
$$;

comment on function runlane.tg_platform_settings__timezone() is
'RL007 for an unknown zone name; recomputes next_run_at of calendar agents that use the organization''s zone.';

revoke all on function runlane.tg_platform_settings__timezone() from public;

create or replace trigger platform_settings_timezone
before insert or update of timezone on runlane.platform_settings
for each row execute function runlane.tg_platform_settings__timezone();
