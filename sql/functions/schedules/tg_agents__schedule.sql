-- tg_agents__schedule: keeps agents.schedule canonical and agents.next_run_at current;
-- callers never write next_run_at themselves.
--
-- Guarantees, on insert and on any update of schedule, enabled, admin_locked, model,
-- owner_id or org_id:
--   * the schedule is parsed (runlane._parse_schedule) in the agent's zone (owner's, else
--     organization's) at now(): invalid -> RL006 and nothing is written; an accepted form
--     is stored as its canonical text, "weekly at HH:MM" as the weekly schedule on the
--     weekday it is set on there ("weekly on thu at 09:00");
--   * a really new interval schedule gets schedule_anchor = now() (the grid's origin);
--   * a closed gate (switched off, admin-locked, no model) or a manual schedule clears
--     next_run_at, writing no journal row;
--   * an open gate with a schedule gets next_run_at = the first slot after now() when
--     the schedule changed, a gate opened, the owner changed, or it had none; otherwise
--     the pending slot is kept.
create or replace function runlane.tg_agents__schedule()
returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_tz text := runlane._agent_timezone(new.owner_id, new.org_id);
    v_spec jsonb := runlane._parse_schedule(new.schedule, v_tz, now());
    v_changed boolean;
    v_was_open boolean;
begin
    new.schedule := v_spec ->> 'canonical';
    v_changed := tg_op = 'INSERT' or new.schedule is distinct from old.schedule;
    if v_spec ->> 'kind' <> 'interval' then
        new.schedule_anchor := null;
    elsif v_changed or new.schedule_anchor is null then
        new.schedule_anchor := now();
    end if;

    if new.schedule = '' or not new.enabled or new.admin_locked or coalesce(new.model, '') = '' then
        new.next_run_at := null;
        return new;
    end if;

    v_was_open := tg_op = 'UPDATE' and old.enabled and not old.admin_locked
        and coalesce(old.model, '') <> '';
    if v_changed or not v_was_open or new.next_run_at is null
       or new.owner_id is distinct from old.owner_id or new.org_id is distinct from old.org_id then
        new.next_run_at := runlane._next_slot(
            v_spec,
            v_tz,
            now(),
            new.schedule_anchor
        );
    end if;
    return new;
end;
$$;

comment on function runlane.tg_agents__schedule() is
'Canonical schedule text (RL006 when invalid) and next_run_at: set when a schedule is set or a gate opens, '
'cleared when a gate closes.';

revoke all on function runlane.tg_agents__schedule() from public;

create or replace trigger agents_schedule
before insert or update of schedule, enabled, admin_locked, model, owner_id, org_id
on runlane.agents
for each row execute function runlane.tg_agents__schedule();
