-- take_delivery (queue generation): lock the next due run delivery for this worker,
-- Graphile get_job style. One job at a time, oldest due first, skipping jobs other
-- workers hold; a lock older than 4 hours is a crashed worker's and is taken over.
-- Counts the delivery attempt. Parameters: worker_id.
with next_job as (
    select j.id
    from runlane.run_jobs as j
    where
        j.task = 'run_agent'
        and (j.locked_at is null or j.locked_at < now() - interval '4 hours')
        and j.run_at <= now()
        and j.attempts < j.max_attempts
    order by j.run_at, j.id
    limit 1
    for update skip locked
)

update runlane.run_jobs as jobs
set
    attempts = jobs.attempts + 1,
    locked_at = now(),
    locked_by = %(worker_id)s
from next_job
where jobs.id = next_job.id
returning jobs.id, jobs.payload, jobs.attempts, jobs.max_attempts
