-- The journal rows of runs reap_stale put back in the queue, by time: failure_minutes
-- counts the reaps of the last hour from them without reading the rest of the journal
-- (one row per claim and per finish of every run). Few rows: one per lease that expired.
create index if not exists run_events_lease_expired_idx
on runlane.run_events (created_at)
where event = 'run.lease_expired';
