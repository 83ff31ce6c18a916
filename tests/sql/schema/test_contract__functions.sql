-- Every function DESIGN.md fixes exists with exactly its name and parameter types.
begin;
select plan(56);

select has_function('runlane', 'submit_message', array['text', 'text', 'text'], 'submit_message(agent, thread, body)');
select has_function('runlane', 'publish_run', array['bigint', 'timestamp with time zone'], 'publish_run(run, wake_at)');
select has_function(
    'runlane', 'create_run', array['text', 'text', 'text', 'timestamp with time zone'],
    'create_run(agent, trigger, prompt, wake_at)'
);
select has_function('runlane', 'run_now', array['text'], 'run_now(agent)');
-- the idempotency-key forms
select has_function(
    'runlane', 'submit_message', array['text', 'text', 'text', 'text'],
    'submit_message(agent, thread, body, idempotency key)'
);
select has_function('runlane', 'run_now', array['text', 'text'], 'run_now(agent, idempotency key)');
select has_function(
    'runlane', 'send_message', array['text', 'text', 'text', 'text'],
    'send_message(agent, thread, body, idempotency key)'
);
select has_function('runlane', 'claim_runs', array['text', 'text[]', 'integer', 'interval'], 'claim_runs(worker, lanes, limit, lease)');
-- the worker's claim: keyed, reporting the runs skipped because a gate closed
select has_function(
    'runlane', 'claim_runs', array['text', 'text[]', 'integer', 'interval', 'uuid', 'boolean'],
    'claim_runs(worker, lanes, limit, lease, claim key, report skipped)'
);
select has_function(
    'runlane', 'claim_runs', array['text', 'text[]', 'integer', 'interval', 'uuid', 'boolean', 'text[]'],
    'claim_runs(worker, lanes, limit, lease, claim key, report skipped, handlers)'
);
select has_function('runlane', 'heartbeat', array['bigint', 'bigint', 'interval'], 'heartbeat(run, fence, lease)');
select has_function('runlane', 'append_output', array['bigint', 'bigint', 'text', 'text'], 'append_output(run, fence, kind, body)');
select has_function(
    'runlane', 'append_outputs', array['bigint[]', 'bigint[]', 'bigint[]', 'text[]', 'text[]'],
    'append_outputs(runs, fences, write numbers, kinds, bodies)'
);
select has_function('runlane', 'outputs_since', array['bigint', 'bigint', 'integer'], 'outputs_since(run, after, limit)');
select has_function(
    'runlane', 'outputs_since_many', array['bigint[]', 'bigint[]', 'integer'],
    'outputs_since_many(runs, afters, limit)'
);
select has_function('runlane', 'save_checkpoint', array['bigint', 'bigint', 'jsonb'], 'save_checkpoint(run, fence, checkpoint)');
select has_function('runlane', 'take_steering', array['bigint', 'bigint'], 'take_steering(run, fence)');
select has_function(
    'runlane', 'finish_run', array['bigint', 'bigint', 'text', 'text', 'numeric'],
    'finish_run(run, fence, outcome, error, cost)'
);
select has_function(
    'runlane', 'release_run', array['bigint', 'bigint', 'timestamp with time zone', 'text'],
    'release_run(run, fence, wake_at, reason)'
);
select has_function('runlane', 'charge', array['bigint', 'bigint', 'numeric'], 'charge(run, fence, amount)');
select has_function('runlane', 'retry_run', array['bigint', 'bigint', 'text', 'interval'], 'retry_run(run, fence, error, delay)');
select has_function('runlane', 'run_timing', array['bigint'], 'run_timing(run)');
select has_function('runlane', 'cancel_run', array['bigint'], 'cancel_run(run)');
select has_function('runlane', 'run_status', array['bigint'], 'run_status(run)');
select has_function('runlane', 'superseded_through', array['bigint'], 'superseded_through(run)');
-- management
select has_function('runlane', 'put_org', array['text', 'jsonb'], 'put_org(org, patch)');
select has_function('runlane', 'put_user', array['text', 'text', 'jsonb'], 'put_user(user, org, patch)');
select has_function('runlane', 'put_agent', array['text', 'jsonb'], 'put_agent(agent, patch)');
select has_function('runlane', 'get_agent', array['text'], 'get_agent(agent)');
select has_function('runlane', 'message_status', array['bigint'], 'message_status(message)');
-- erasure
select has_function('runlane', 'erase_thread', array['text', 'text'], 'erase_thread(agent, thread)');
select has_function('runlane', 'erase_agent', array['text'], 'erase_agent(agent)');
select has_function('runlane', 'erase_user', array['text'], 'erase_user(user)');
select has_function('runlane', 'erase_org', array['text'], 'erase_org(org)');
select has_function('runlane', 'parse_schedule', array['text'], 'parse_schedule(schedule)');
select has_function('runlane', 'org_node', array['text'], 'org_node(org)');
select has_function(
    'runlane', 'next_slot', array['text', 'text', 'timestamp with time zone'],
    'next_slot(schedule, timezone, after)'
);
select has_function('runlane', 'tick', array['timestamp with time zone', 'integer'], 'tick(now, limit)');
select has_function('runlane', 'reap_stale', array['timestamp with time zone', 'integer'], 'reap_stale(now, limit)');
select has_function('runlane', 'cancel_redundant_timer_runs', array['integer'], 'cancel_redundant_timer_runs(limit)');
select has_function('runlane', 'purge_finished', array['interval', 'integer'], 'purge_finished(older_than, limit)');
select has_function('runlane', 'queue_delay', array['interval', 'timestamp with time zone'], 'queue_delay(threshold, now)');
select has_function('runlane', 'weekly_spend', array['text', 'timestamp with time zone'], 'weekly_spend(owner, now)');
-- tenants
select has_function('runlane', 'stream_token', array['bigint'], 'stream_token(run)');
select has_function('runlane', 'scope_api_login', array['name', 'text'], 'scope_api_login(login, org)');
select has_function('runlane', 'lead_maintenance', array['text', 'interval'], 'lead_maintenance(worker, ttl)');
select has_function('runlane', 'resign_maintenance', array['text'], 'resign_maintenance(worker)');
select has_function('runlane', 'notify_queue_usage', array[]::text[], 'notify_queue_usage()');
-- a thread's earlier turns, for agents that send the conversation
select has_function(
    'runlane', 'thread_history', array['bigint', 'bigint', 'integer'],
    'thread_history(run, fence, limit)'
);
-- one run with its last error, for `runlane run ID`
select has_function('runlane', 'run_detail', array['bigint'], 'run_detail(run)');
-- the dashboard's charts and queue-delay warning
select has_function(
    'runlane', 'lane_minutes', array['interval', 'timestamp with time zone', 'integer[]'],
    'lane_minutes(since, now, queued)'
);
select has_function(
    'runlane', 'queue_delay_status', array['interval', 'timestamp with time zone'],
    'queue_delay_status(threshold, now)'
);
select has_function('runlane', 'owner_spend', array['timestamp with time zone'], 'owner_spend(now)');
select has_function('runlane', 'agent_last_runs', array[]::text[], 'agent_last_runs()');
-- the overview's counts and warning in one read, a page of agents
select has_function(
    'runlane', 'lane_overview', array['interval', 'timestamp with time zone'],
    'lane_overview(threshold, now)'
);
select has_function(
    'runlane', 'agent_page', array['text', 'integer', 'text', 'text'],
    'agent_page(from, limit, match, status)'
);

select * from finish();
rollback;
