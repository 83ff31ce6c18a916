-- 0024 — each lane's queued runs by creation, one key and nothing else: lane_minutes
-- counts the queue of each minute of its window as ranges of creation times, and an
-- index-only scan's cost per entry follows the width of the entry and the number of
-- keys checked on it (runs_unfinished_lane_idx, with four keys and five more columns,
-- took 2.5 times as long per entry: bench/dashboard_queries.py, 100,000 queued runs,
-- lane_minutes 50 -> 35 ms of CPU).
--
-- Writes: a run has an entry here only while queued (a submission, a retry put back),
-- in one of the two; a claim, a heartbeat, a finish write none.
--
-- Plain CREATE INDEX (migrations run in one transaction): it blocks writes to runs while
-- it builds; on a large table build both beforehand with CREATE INDEX CONCURRENTLY under
-- these names and this migration finds them in place.
create index if not exists runs_queued_interactive_idx
on runlane.runs (created_at)
where state = 'queued' and lane = 'interactive';

create index if not exists runs_queued_background_idx
on runlane.runs (created_at)
where state = 'queued' and lane = 'background';
