-- complete_delivery (queue generation): the delivery is done (run completed, failed for
-- good, or dropped): Graphile complete_job deletes the job. Parameters: job_id.
delete from runlane.run_jobs
where id = %(job_id)s
returning id
