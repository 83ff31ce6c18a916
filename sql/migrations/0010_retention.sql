-- 0010 — retention: runlane.purge_finished deletes runs that finished long ago.
--
-- The purge looks for terminal runs by finish time, oldest first; this partial index keeps
-- that a short range scan however many runs the table holds (queued and running runs,
-- finished_at null, are not in it).
create index runs_finished_idx on runlane.runs (finished_at, run_id)
where finished_at is not null;

comment on table runlane.run_events is
'The journal of lifecycle and terminal events; no pass deletes from it, except '
'runlane.purge_finished, which deletes a purged run''s events with the run (retention, '
'off unless asked).';
