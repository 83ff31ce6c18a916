-- 0011 — purge rate: the foreign key from runs.source_message_id gets its index.
--
-- purge_finished deletes chat messages with their runs. For each deleted message,
-- PostgreSQL checks the foreign key runs.source_message_id -> messages, and without an
-- index leading with that column the check is a scan of runlane.runs: with 1,000,000
-- runs the purge fell to about 7 runs/s (bench/claim_after_purge.py), with this index
-- about 5,600 runs/s. Partial: background runs have no source message, and the check's
-- "source_message_id = $1" implies "is not null", so the planner uses it.
-- A plain CREATE INDEX (migrations run in one transaction): it blocks writes to runs
-- while it builds, as 0010's did; on a large table, build it beforehand with
-- CREATE INDEX CONCURRENTLY under this name and this migration finds it in place.
create index if not exists runs_source_message_idx on runlane.runs (source_message_id)
where source_message_id is not null;
