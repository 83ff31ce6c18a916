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
begin
    if not runlane._is_timezone(new.timezone) then
        raise exception 'invalid time zone %', quote_literal(left(coalesce(new.timezone, 'null'), 60))
            using errcode = 'RL007',
                  hint = 'Use an IANA zone name such as Europe/Berlin or UTC (see pg_timezone_names; '
                      || 'localtime, posixrules, Factory and posix/ or right/ names are not zones).';
    end if;

    if tg_op = 'UPDATE' and new.timezone is distinct from old.timezone then
        update runlane.agents as a
        set next_run_at = runlane._next_slot(
            runlane.parse_schedule(a.schedule), new.timezone, now(), a.schedule_anchor
        )
        from runlane.users as u
        where a.org_id = new.org_id
          and u.user_id = a.owner_id
          and u.timezone is null
          and a.next_run_at is not null
          and a.schedule not like 'every %';
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
