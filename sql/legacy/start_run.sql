-- start_run (queue generation): the delivered run starts, unless someone else already
-- claimed, finished or cancelled it; then no row comes back and the delivery is
-- dropped, never executed. Parameters: run_id.
update runlane.runs
set
    state = 'running',
    attempts = attempts + 1,
    heartbeat_at = now()
where run_id = %(run_id)s and state = 'queued'
returning run_id, attempts, max_attempts, agent_id, lane, trigger, thread_id, prompt, model
