-- 0018 — the index of queued runs in claim order starts with the lane:
-- runs_lane_claim_order_idx (lane, claim_class, run_id) replaces runs_claim_order_idx
-- (claim_class, run_id).
--
-- Why: claim_runs' window reads the oldest eligible runs of the claim's lanes in claim
-- order, 4 x the candidates it wants. Through (claim_class, run_id) it stepped over every
-- queued run of the other lane: with 5,000 background runs queued (a schedule storm held
-- back by its organizations' caps), each claim of a chat backlog read about 5,100 index
-- entries, 3-5 ms per claim. Led by the lane, each lane's queue is read in claim order on
-- its own (one descent per lane). The index holds queued runs only, as the one it
-- replaces: a claim writes no entry into it, an enqueue one, as before.
--
-- Plain CREATE INDEX (migrations run in one transaction): it blocks writes to runs while
-- it builds (queued runs only); on a large queue build it beforehand with CREATE INDEX
-- CONCURRENTLY under this name and this migration finds it in place. A claim_runs of an
-- earlier schema (a rolling upgrade's expand step) reads the window through
-- runs_fair_claim_idx or the table instead: slower, never wrong.
create index if not exists runs_lane_claim_order_idx
on runlane.runs (lane, claim_class, run_id)
where state = 'queued';

drop index if exists runlane.runs_claim_order_idx;
