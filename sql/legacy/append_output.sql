-- append_output (queue generation): persist one output of the running attempt.
-- Parameters: run_id, attempt, kind, body.
insert into runlane.run_outputs (run_id, attempt, kind, body)
values (%(run_id)s, %(attempt)s, %(kind)s, %(body)s)
returning output_id
