-- requeue_run (queue generation): an attempt failed. The run goes back to queued while
-- it has attempts left, else it fails; the delivery's retry time (fail_delivery) says
-- when it runs again. Parameters: run_id, error.
update runlane.runs
set
    state = case when attempts >= max_attempts then 'failed' else 'queued' end,
    reason = case when attempts >= max_attempts then 'attempts_exhausted' end,
    finished_at = case when attempts >= max_attempts then now() end
where run_id = %(run_id)s and state = 'running'
returning run_id, state
