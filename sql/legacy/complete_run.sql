-- complete_run (queue generation): the run succeeded. Parameters: run_id.
update runlane.runs
set
    state = 'succeeded',
    finished_at = now()
where run_id = %(run_id)s and state = 'running'
returning run_id
