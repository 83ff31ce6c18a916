-- create_run (queue generation API): a queued run of an agent, with its settings of the
-- day. Its delivery is enqueued in the same transaction (enqueue_run_delivery).
-- Parameters: agent_id, lane, trigger.
insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model, computer_id)
select
    a.org_id,
    a.agent_id,
    %(lane)s,
    %(trigger)s,
    a.thread_id,
    a.prompt,
    a.model,
    a.computer_id
from runlane.agents as a
where a.agent_id = %(agent_id)s
returning run_id
