-- 0016 — a run's source message is one of its own messages, by a foreign key its primary
-- key checks; runs_source_message_idx goes.
--
-- Why: runs.source_message_id never changes after the run is written (purge clears it),
-- but it was the key of runs_source_message_idx, so every claim and every finish of a
-- chat run, both non-HOT updates, wrote a new entry into it. The index existed for one
-- reader: the check of runs_source_message_fk when the purge deletes a message (0011).
--
-- The new key names the pair (run_id, source_message_id) -> messages (run_id,
-- message_id): the source message is attached to the very run it started, as every
-- writer of runs already did (submit_message and _dispatch_held_messages write both in
-- one statement). It says more than the old key (which only said the message exists),
-- and its check on a message's deletion is "run_id = $1 and source_message_id = $2",
-- a runs_pkey probe. A message can no longer be the source of a run it is not attached
-- to, so the purge's guard for that case goes too.
--
-- messages (run_id, message_id) becomes a full unique index (the key's target), in place
-- of messages_run_idx (run_id, for attached messages): readers of a run's messages and
-- the check of messages.run_id -> runs use it the same way.
--
-- Adding the key reads every chat run once to validate it (23503 names a run whose
-- source message is not attached to it; no runlane function ever wrote one). A plain
-- CREATE INDEX: on a large messages table build it beforehand with CREATE UNIQUE INDEX
-- CONCURRENTLY under this name and this migration finds it in place.
create unique index if not exists messages_run_message_idx
on runlane.messages (run_id, message_id);

alter table runlane.runs
add constraint runs_source_message_of_run_fk
foreign key (run_id, source_message_id) references runlane.messages (run_id, message_id);

alter table runlane.runs drop constraint runs_source_message_fk;

drop index if exists runlane.runs_source_message_idx;

drop index if exists runlane.messages_run_idx;
