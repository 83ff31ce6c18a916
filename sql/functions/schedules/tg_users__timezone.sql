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
declare
    v_agents text[];
    v_next timestamptz[];
begin
    if new.timezone is not null and not runlane._is_timezone(new.timezone) then
        raise exception 'invalid time zone %', quote_literal(left(new.timezone, 60))
            using errcode = 'RL007',
                  hint = 'Use an IANA zone name such as Europe/Berlin (see pg_timezone_names; localtime, '
                      || 'posixrules, Factory and posix/ or right/ names are not zones), '
                      || 'or null for the organization''s zone.';
    end if;

    if tg_op = 'UPDATE' and new.timezone is distinct from old.timezone then
        -- (the next slots are computed by a read, then written by key: Citus calls no
        -- STABLE function on a column inside an UPDATE)
        select
            coalesce(array_agg(a.agent_id), '{}'),
            coalesce(array_agg(
                runlane._next_slot(
                    runlane.parse_schedule(a.schedule),
                    coalesce(new.timezone, s.timezone, 'UTC'),
                    now(),
                    a.schedule_anchor
                )
            ), '{}')
        into v_agents, v_next
        from runlane.agents as a
        join runlane.platform_settings as s on s.org_id = a.org_id
        where a.org_id = new.org_id
          and a.owner_id = new.user_id
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

comment on function runlane.tg_users__timezone() is
'RL007 for an unknown zone name; recomputes the owner''s calendar agents'' next_run_at when it changes.';

revoke all on function runlane.tg_users__timezone() from public;

create or replace trigger users_timezone
before insert or update of timezone on runlane.users
for each row execute function runlane.tg_users__timezone();
