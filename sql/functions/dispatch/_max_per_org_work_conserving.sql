-- _max_per_org_work_conserving: whether this session's per-worker organization bound is
-- work-conserving.
--
-- Guarantees: reads the session setting runlane.max_per_org_mode (`runlane worker` sets
-- work_conserving on its claim connections unless --max-per-org-strict). Unset, empty
-- or strict: false, the bound always binds (runlane.max_per_org runs of one organization
-- per worker at most). work_conserving: true, the bound binds only while an organization
-- within its room has runs waiting (claim_runs). Anything else: 22023 naming the setting,
-- so a typo never silently changes how the bound binds.
create or replace function runlane._max_per_org_work_conserving()
returns boolean
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_setting text := btrim(coalesce(current_setting('runlane.max_per_org_mode', true), ''));
begin
    if v_setting in ('', 'strict') then
        return false;
    end if;
    if v_setting = 'work_conserving' then
        return true;
    end if;
    raise exception 'runlane.max_per_org_mode must be strict or work_conserving, got %',
        quote_literal(left(v_setting, 40))
        using errcode = '22023';
end;
$$;

comment on function runlane._max_per_org_work_conserving() is
'The runlane.max_per_org_mode session setting: true for work_conserving, false for strict or '
'unset; 22023 otherwise.';

revoke all on function runlane._max_per_org_work_conserving() from public;
