-- The tables and columns DESIGN.md fixes exist after `runlane migrate`.
begin;
select plan(13);

select has_schema('runlane', 'the runlane schema exists');
select has_table('runlane', 'platform_settings', 'platform_settings exists');
select columns_are('runlane', 'platform_settings', array[
    'org_id', 'timezone', 'agent_max_concurrency', 'agent_iteration_cap', 'agent_weekly_budget'
], 'platform_settings has exactly the contract columns');
select has_table('runlane', 'users', 'users exists');
select has_table('runlane', 'agents', 'agents exists');
-- the code that runs an agent: 'default' unless put_agent's key handler says otherwise
select col_not_null('runlane', 'agents', 'handler', 'agents.handler is not null');
select col_default_is('runlane', 'agents', 'handler', 'default', 'agents.handler defaults to ''default''');
select has_table('runlane', 'messages', 'messages exists');
select has_table('runlane', 'runs', 'runs exists');
select has_table('runlane', 'run_outputs', 'run_outputs exists');
select has_table('runlane', 'computer_leases', 'computer_leases exists');
select has_table('runlane', 'run_events', 'run_events exists');
select has_table('runlane', 'run_jobs', 'run_jobs exists');

select * from finish();
rollback;
