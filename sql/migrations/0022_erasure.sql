-- 0022 — a charge outlives the erasure of its run: runlane.charges.run_id may be null.
--
-- Why: erase_thread and erase_agent delete a conversation's runs with everything that
-- carries its content, but an owner's weekly budget counts every charge of the week.
-- Such a charge stays as an amount without content: its owner, organization, attempt,
-- amount and time, its run_id set to null. Retention (runlane.purge_finished) deletes
-- these detached charges once they are as old as the runs it purges, through the
-- existing charges_run_idx (a btree finds the nulls).
--
-- Dropping NOT NULL reads no row: ACCESS EXCLUSIVE on runlane.charges, briefly.
alter table runlane.charges alter column run_id drop not null;

comment on column runlane.charges.run_id is
'The run charged; null once the run was erased (the amount still counts for its owner''s week).';
