-- 0014 — runs_running_idx (org_id, lane) held every running run; its only readers count
-- an organization's running BACKGROUND runs (claim_runs' cap: the organizations at their
-- cap, then the exact count under the organization's lock). runs_background_running_idx
-- holds those alone, and runs_running_idx goes.
--
-- Why: every claim of a chat run wrote an entry into runs_running_idx, all of an
-- organization's chat runs under one key (one tenant's burst: every claimer adding to
-- the same leaf pages). In bench/durable_compare (one organization, durable commits,
-- four paired runs) leaving chat runs out of it raised jobs/s by 7-18 % and lowered
-- PostgreSQL's CPU per run by 7-13 %. A claimed chat run now writes one index entry
-- fewer; a background run writes as many as before.
--
-- Plain CREATE INDEX (migrations run in one transaction): it blocks writes to runs while
-- it builds (only running background runs are in it: a few per organization); on a large
-- table build it beforehand with CREATE INDEX CONCURRENTLY under this name and this
-- migration finds it in place, then drops runs_running_idx.
create index if not exists runs_background_running_idx
on runlane.runs (org_id)
where state = 'running' and lane = 'background';

drop index if exists runlane.runs_running_idx;
