-- worker_heartbeat (queue generation, last release): the worker is alive.
-- Parameters: worker_id.
update runlane.workers
set heartbeat_at = now()
where worker_id = %(worker_id)s
returning worker_id
