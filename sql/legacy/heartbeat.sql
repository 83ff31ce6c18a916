-- heartbeat (queue generation): the worker still runs this run. Parameters: run_id.
update runlane.runs
set heartbeat_at = now()
where run_id = %(run_id)s and state = 'running'
returning run_id
