-- 0013 — the queued runs that are not simply waiting in line: those with a wake time (a
-- retry's backoff, a delayed start) and those that have started before (a retry put back
-- in the queue). The dashboard's reads of a long queue (issue 16: 100,000 queued runs)
-- count the queue on runs_unfinished_lane_idx without judging its entries, and judge one
-- by one only these few runs, read here instead of filtered out of the whole queue:
-- lane_overview (lane_status's counts and the queue-delay warning in one read) and
-- lane_minutes (its first waits and first responses).
--
-- Writes: only a run that is queued with a wake time or after a start has an entry here
-- (a plain submission, a claim, a finish have none; a retry put back with its backoff has
-- one). Every column in it is already in runs_unfinished_lane_idx, so no update that is
-- HOT today stops being HOT.
--
-- Plain CREATE INDEX (migrations run in one transaction): it blocks writes to runs while
-- it builds; on a large table build it beforehand with CREATE INDEX CONCURRENTLY under
-- this name and this migration finds it in place.
create index if not exists runs_queued_exceptions_idx
on runlane.runs (lane, claim_class, created_at)
include (wake_at, first_started_at, finished_at, org_id, run_id)
where state = 'queued' and (
    wake_at is not null or first_started_at is not null or finished_at is not null
);
