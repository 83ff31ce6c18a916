-- enqueue_run_delivery (queue generation API): deliver a run to a worker through the job
-- queue (task run_agent, payload {"run_id": N}), due at once. Parameters: run_id.
insert into runlane.run_jobs (task, payload)
values ('run_agent', jsonb_build_object('run_id', %(run_id)s::bigint))
returning id
