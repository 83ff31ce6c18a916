-- 0025 — lane_minutes takes each lane's queued runs (p_queued, optional), so that the
-- overview, which has just counted them in lane_overview, does not count the queue before
-- the window a second time. The two-argument form goes: with both in place a call by name
-- (p_since => ...) would match either. No table is locked.
drop function if exists runlane.lane_minutes(interval, timestamptz);
