-- put_org: create or update an organization (its runlane.platform_settings row).
--
-- Guarantees:
-- * Keys timezone (a zone name, RL007 when unknown), agent_max_concurrency and
--   agent_iteration_cap (whole numbers >= 1), agent_weekly_budget (a number >= 0, or
--   JSON null = unlimited). An absent key keeps its value (a new organization gets the
--   column defaults: UTC, 4, 20, unlimited). Returns the row as stored.
-- * 22023 for an unknown key, a value of the wrong JSON type or out of range, naming the
--   key and the accepted ones; 22004/22023 for a null or blank organization id.
-- * A login scoped to one organization (runlane._api_org) may only change its own: any
--   other organization id, existing or not, answers RL008 with one message, before any
--   organization is read, so nothing leaks by existence.
-- * Concurrent calls for a new id: one creates, the others patch (insert … on conflict).
-- * Its transaction, left open, holds up only other put_org calls of the organization:
--   the row is locked FOR NO KEY UPDATE, so the organization's runs and messages are
--   still written, and claims never lock it (claim_runs serializes on
--   runlane.org_claim_locks).
create or replace function runlane.put_org(p_org_id text, p_patch jsonb default '{}')
returns runlane.platform_settings
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_row runlane.platform_settings;
begin
    perform runlane._check_id('organization id', p_org_id);
    perform runlane._check_patch('organization', p_patch, jsonb_build_object(
        'timezone', jsonb_build_array('string'),
        'agent_max_concurrency', jsonb_build_array('number'),
        'agent_iteration_cap', jsonb_build_array('number'),
        'agent_weekly_budget', jsonb_build_array('number', 'null')
    ));
    if p_org_id <> coalesce(v_scope, p_org_id) then
        raise exception 'unknown organization %', runlane._quote_for_error(p_org_id)
            using errcode = 'RL008',
                  hint = 'A login limited to one organization manages only that organization.';
    end if;
    -- A budget is an amount of spend: the one amount rule (0 to 1e12), null = unlimited.
    if jsonb_typeof(p_patch -> 'agent_weekly_budget') = 'number' then
        perform runlane._require_amount((p_patch ->> 'agent_weekly_budget')::numeric,
                                        'agent_weekly_budget');
    end if;

    insert into runlane.platform_settings (org_id) values (p_org_id)
    on conflict (org_id) do nothing;
    -- (FOR NO KEY UPDATE: the key never changes, and a stronger lock would hold up, until
    -- this transaction ends, every write whose foreign-key check reads the row: a run's
    -- update that checks its keys, a new run or message of the organization)
    select * into strict v_row from runlane.platform_settings as s
    where s.org_id = p_org_id for no key update;

    if p_patch ? 'timezone' then
        v_row.timezone := p_patch ->> 'timezone';
    end if;
    if p_patch ? 'agent_max_concurrency' then
        v_row.agent_max_concurrency := runlane._patch_int(
            'agent_max_concurrency', p_patch -> 'agent_max_concurrency', 1);
    end if;
    if p_patch ? 'agent_iteration_cap' then
        v_row.agent_iteration_cap := runlane._patch_int(
            'agent_iteration_cap', p_patch -> 'agent_iteration_cap', 1);
    end if;
    if p_patch ? 'agent_weekly_budget' then
        v_row.agent_weekly_budget := (p_patch ->> 'agent_weekly_budget')::numeric;
    end if;

    update runlane.platform_settings as s
    set timezone = v_row.timezone,
        agent_max_concurrency = v_row.agent_max_concurrency,
        agent_iteration_cap = v_row.agent_iteration_cap,
        agent_weekly_budget = v_row.agent_weekly_budget
    where s.org_id = p_org_id
    returning * into strict v_row;
    return v_row;
end;
$$;

comment on function runlane.put_org(text, jsonb) is
'Create or patch an organization (timezone, agent_max_concurrency, agent_iteration_cap, agent_weekly_budget); '
'22023 unknown key or wrong type, RL007 bad zone, RL008 outside a scoped login''s organization.';

revoke all on function runlane.put_org(text, jsonb) from public;
grant execute on function runlane.put_org(text, jsonb) to runlane_api;
