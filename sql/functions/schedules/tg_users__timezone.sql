-- tg_users__timezone: an owner's time zone is a real zone name, and their agents'
-- calendar schedules follow it.
--
-- Guarantees: a timezone that is not null and not a zone name (runlane._is_timezone)
-- raises RL007 and nothing is written. When it changes (including to null, which falls
-- back to the organization's zone), every scheduled, gate-open calendar agent of the owner gets
-- next_run_at = its first slot after now() in the new zone. Interval schedules do not
-- depend on a zone and keep their pending slot.
create or replace function runlane.tg_users__timezone()
returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if new.timezone is not null and not runlane._is_timezone(new.timezone) then
        raise exception 'invalid time zone %', quote_literal(left(new.timezone, 60))
            using errcode = 'RL007',
                  hint = 'Use an IANA zone name such as Europe/Berlin (see pg_timezone_names; localtime, '
                      || 'posixrules, Factory and posix/ or right/ names are not zones), '
                      || 'or null for the organization''s zone.';
    end if;

    if tg_op = 'UPDATE' and new.timezone is distinct from old.timezone then
        update runlane.agents as a
        set next_run_at = runlane._next_slot(
            runlane.parse_schedule(a.schedule),
            coalesce(new.timezone, s.timezone, 'UTC'),
            now(),
            a.schedule_anchor
        )
        from runlane.platform_settings as s
        where a.owner_id = new.user_id
          and s.org_id = a.org_id
          and a.next_run_at is not null
          and a.schedule not like 'every %';
    end if;
    return new;
end;
$$;

comment on function runlane.tg_users__timezone() is
'RL007 for an unknown zone name; recomputes the owner''s calendar agents'' next_run_at when it changes.';

revoke all on function runlane.tg_users__timezone() from public;

create or replace trigger users_timezone
before insert or update of timezone on runlane.users
for each row execute function runlane.tg_users__timezone();
