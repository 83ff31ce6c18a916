-- 0012 — dashboard reads: two indexes so a page costs the database little with a long
-- queue and a long history (issue 16, bench/dashboard_queries.py: 100,000 queued and
-- 1,000,000 finished runs).
--
-- runs_unfinished_lane_idx covers what lane_status, queue_delay_status (_queue_delay)
-- and lane_minutes read of the unfinished runs, so each reads the queue as an
-- index-only scan instead of visiting every queued run's table page. Partial, so
-- finished history is never in it; its columns are ones that change only together with
-- the state or an already indexed column (wake_at, first_started_at, finished_at), or
-- never: the updates that are HOT today (a first response, a checkpoint) stay HOT.
-- (first_response_at is deliberately not in it: lane_minutes reads it from the table
-- for the few unfinished runs that have started.)
--
-- runs_agent_newest_idx replaces runs_agent_idx (agent_id, created_at): with run_id as
-- its last key, "an agent's newest run by (created_at, run_id)" (agent_last_runs,
-- agent_journal) is the first entry of a backward scan, with no sort per agent
-- (agent_last_runs for 5,000 agents: 57 ms -> 27 ms). Every query that used the old
-- index can use this one, so the number of indexes written per run stays the same.
--
-- Plain CREATE INDEX (migrations run in one transaction): it blocks writes to runs while
-- it builds; on a large table build both beforehand with CREATE INDEX CONCURRENTLY under
-- these names and this migration finds them in place.
create index if not exists runs_unfinished_lane_idx
on runlane.runs (lane, state, claim_class, created_at)
include (wake_at, first_started_at, finished_at, org_id, run_id)
where state in ('queued', 'running');

create index if not exists runs_agent_newest_idx
on runlane.runs (agent_id, created_at, run_id);

drop index if exists runlane.runs_agent_idx;
