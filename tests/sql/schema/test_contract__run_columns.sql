-- runs, agents, messages, run_outputs, computer_leases and run_events carry every column
-- the contract fixes (more are allowed).
begin;
select plan(55);

select has_column('runlane', 'runs', c, 'runs.' || c || ' exists')
from unnest(array[
    'run_id', 'org_id', 'agent_id', 'lane', 'trigger', 'state', 'reason', 'thread_id', 'prompt', 'model',
    'source_message_id', 'computer_id', 'wake_at', 'attempts', 'max_attempts', 'fence', 'lease_owner',
    'lease_expires_at', 'heartbeat_at', 'timer_routine', 'timer_occurrence', 'timer_timezone', 'checkpoint',
    'cost', 'created_at', 'first_started_at', 'first_response_at', 'finished_at'
]) as c;

select has_column('runlane', 'agents', c, 'agents.' || c || ' exists')
from unnest(array[
    'agent_id', 'org_id', 'owner_id', 'enabled', 'admin_locked', 'model', 'prompt', 'thread_id',
    'computer_id', 'schedule', 'next_run_at'
]) as c;

select has_column('runlane', 'messages', c, 'messages.' || c || ' exists')
from unnest(array['message_id', 'org_id', 'agent_id', 'thread_id', 'body', 'created_at', 'run_id']) as c;

select has_column('runlane', 'run_outputs', c, 'run_outputs.' || c || ' exists')
from unnest(array['output_id', 'run_id', 'attempt', 'kind', 'body', 'created_at']) as c;

select is(
    (
        select array_agg(attname::text order by attnum) from pg_attribute
        where attrelid = 'runlane.computer_leases'::regclass and attnum > 0 and not attisdropped
    ),
    -- (and org_id, the lease's organization, which Citus places the row by)
    array['computer_id', 'run_id', 'fence', 'expires_at', 'org_id'],
    'computer_leases has exactly the contract columns and its organization'
);

select col_default_is('runlane', 'runs', 'max_attempts', '3', 'max_attempts defaults to 3');
select col_default_is('runlane', 'runs', 'fence', '0', 'the fence starts at 0');

select * from finish();
rollback;
