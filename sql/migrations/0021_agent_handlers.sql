-- 0021 — handlers: which code runs an agent, and which workers serve it.
--
-- agents.handler names the code that runs the agent (`runlane worker --agent
-- NAME=module:attr`); runs.handler carries it onto each run, set at creation and moved
-- with the agent's queued runs when put_agent changes it, so a claim for the handlers a
-- worker serves reads only their runs: the claim indexes of queued runs lead with
-- (lane, handler), and 10,000 queued runs of a handler nobody serves cost a claim one
-- index descent, never a read of each. workers.handlers records what each worker
-- serves (null: an older worker, which claims any handler), so `runlane status` names a
-- handler with queued runs that no live worker serves.
--
-- The new columns have constant defaults (no table rewrite). The two indexes replace
-- runs_lane_claim_order_idx and runs_fair_claim_idx under new names; plain CREATE INDEX
-- (queued runs only) blocks writes to runs while it builds: on a large queue add
-- runs.handler as here and build them beforehand with CREATE INDEX CONCURRENTLY under
-- these names. A claim_runs of the earlier schema reads through them more slowly, never
-- wrongly.
alter table runlane.agents
add column if not exists handler text not null default 'default'
constraint agents_handler_format check (handler ~ '^[a-z0-9_.-]{1,64}$');

alter table runlane.runs
add column if not exists handler text not null default 'default';

alter table runlane.workers
add column if not exists handlers text[];

comment on column runlane.agents.handler is
'The code that runs this agent: workers serve handlers by name (runlane worker --agent NAME=module:attr).';
comment on column runlane.runs.handler is
'The agent''s handler while the run is queued (claims read only the handlers a worker serves).';
comment on column runlane.workers.handlers is
'The handlers this worker serves; null: any handler (a worker of an earlier version).';

create index if not exists runs_handler_claim_order_idx
on runlane.runs (lane, handler, claim_class, run_id)
where state = 'queued';

create index if not exists runs_handler_fair_claim_idx
on runlane.runs (claim_class, lane, handler, org_id, run_id)
where state = 'queued';

drop index if exists runlane.runs_lane_claim_order_idx;
drop index if exists runlane.runs_fair_claim_idx;
