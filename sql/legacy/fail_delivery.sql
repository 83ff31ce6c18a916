-- fail_delivery (queue generation): Graphile fail_job. The delivery is unlocked and
-- retried after exp(least(attempts, 10)) seconds, counted from the later of now and its
-- due time. Parameters: job_id, worker_id, error.
update runlane.run_jobs
set
    last_error = %(error)s,
    run_at = greatest(now(), run_at) + exp(least(attempts, 10)) * interval '1 second',
    locked_by = null,
    locked_at = null
where id = %(job_id)s and locked_by = %(worker_id)s
returning id, run_at
