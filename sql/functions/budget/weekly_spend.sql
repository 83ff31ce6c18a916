-- weekly_spend: what an owner's agents cost in the week containing p_now.
--
-- Guarantees: the sum of runs.cost of runs of every agent owned by p_owner_id created in
-- the week [Monday 00:00, next Monday 00:00) of the owner's zone (users.timezone, else
-- the organization's), with the wall-clock rules of runlane._wall_to_instant. 0 when
-- nothing was spent. Raises 22023 for an unknown owner, and for another organization's
-- owner when the login is scoped to one (the same message: nothing leaks by existence).
create or replace function runlane.weekly_spend(p_owner_id text, p_now timestamptz default now())
returns numeric
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_tz text;
    v_org text;
    v_monday timestamp;
    v_total numeric;
begin
    if p_owner_id is null or p_now is null then
        raise exception 'weekly_spend needs an owner and an instant'
            using errcode = '22004';
    end if;
    select coalesce(u.timezone, s.timezone, 'UTC'), u.org_id into v_tz, v_org
    from runlane.users as u
    left join runlane.platform_settings as s on s.org_id = u.org_id
    where u.user_id = p_owner_id;
    if not found or not runlane._in_scope(v_org) then
        raise exception 'unknown owner %', p_owner_id
            using errcode = '22023';
    end if;

    v_monday := date_trunc('week', p_now at time zone v_tz);
    select coalesce(sum(r.cost), 0) into v_total
    from runlane.agents as a
    join runlane.runs as r on r.agent_id = a.agent_id
    where a.owner_id = p_owner_id
      and r.created_at >= runlane._wall_to_instant(v_monday, v_tz)
      and r.created_at < runlane._wall_to_instant(v_monday + interval '7 days', v_tz);
    return v_total;
end;
$$;

comment on function runlane.weekly_spend(text, timestamptz) is
'Cost of an owner''s agent runs created in the week (Monday 00:00 in the owner''s zone) containing p_now.';

revoke all on function runlane.weekly_spend(text, timestamptz) from public;
grant execute on function runlane.weekly_spend(text, timestamptz) to runlane_api, runlane_worker;
