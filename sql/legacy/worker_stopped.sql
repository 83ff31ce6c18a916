-- worker_stopped (queue generation, last release): the worker stopped taking deliveries
-- and finished what it had. Parameters: worker_id.
update runlane.workers
set stopped_at = now(), heartbeat_at = now()
where worker_id = %(worker_id)s
returning worker_id
