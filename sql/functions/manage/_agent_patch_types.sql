-- _agent_patch_types: the keys of an agent that an application writes and reads back,
-- each with the JSON types its value may have.
--
-- Guarantees: one list for both directions: put_agent accepts exactly these keys
-- (runlane._check_patch) and get_agent returns exactly these keys (plus next_run_at).
-- A key added here is a column of runlane.agents of the same name.
create or replace function runlane._agent_patch_types()
returns jsonb
language sql
immutable
set search_path = pg_catalog, pg_temp
as $$
    select jsonb_build_object(
        'org_id', jsonb_build_array('string'),
        'owner_id', jsonb_build_array('string'),
        'model', jsonb_build_array('string', 'null'),
        'prompt', jsonb_build_array('string'),
        'thread_id', jsonb_build_array('string', 'null'),
        'computer_id', jsonb_build_array('string', 'null'),
        'schedule', jsonb_build_array('string'),
        'enabled', jsonb_build_array('boolean'),
        'admin_locked', jsonb_build_array('boolean'),
        'handler', jsonb_build_array('string')
    )
$$;

comment on function runlane._agent_patch_types() is
'The agent keys put_agent accepts and get_agent returns, each with its accepted JSON types.';

revoke all on function runlane._agent_patch_types() from public;
