-- _budget_exhausted: true when the organization sets agent_weekly_budget and the
-- owner's weekly_spend for the week of p_now has reached it (a budget of 0 is always
-- exhausted); false when the budget is null (unlimited).
create or replace function runlane._budget_exhausted(p_owner_id text, p_org_id text, p_now timestamptz)
returns boolean
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_budget numeric;
begin
    select s.agent_weekly_budget into v_budget
    from runlane.platform_settings as s
    where s.org_id = p_org_id;
    if v_budget is null then
        return false;
    end if;
    return runlane.weekly_spend(p_owner_id, p_now) >= v_budget;
end;
$$;

comment on function runlane._budget_exhausted(text, text, timestamptz) is
'True when the owner''s spend this week has reached the organization''s agent_weekly_budget.';

revoke all on function runlane._budget_exhausted(text, text, timestamptz) from public;
