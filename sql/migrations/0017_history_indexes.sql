-- 0017 — the indexes that read a run's history hold finished runs only, so a claim no
-- longer writes entries into them.
--
-- Why: runs_agent_newest_idx (agent_id, created_at, run_id) and runs_thread_idx
-- (thread_id) held every run, and a claim is a non-HOT update, so every claim wrote a new
-- entry into both (and every enqueue wrote them once more) though neither key changes
-- after a run is written. Their readers (an agent's runs newest first: agent_journal,
-- agent_last_runs, agent_page; a thread's earlier runs: thread_history) now read the
-- finished runs from the two history indexes below and the few unfinished ones from the
-- unfinished-run indexes a run is in while queued or running anyway:
--   * runs_agent_history_idx and runs_thread_history_idx: finished runs only (a finish
--     writes its entries, as it did into the indexes they replace);
--   * runs_unfinished_agent_idx gains (created_at, run_id) after (agent_id, lane), so an
--     agent's newest unfinished run per lane is one probe; its readers (agent_id, lane)
--     read it as before;
--   * a thread's unfinished runs: runs_unfinished_thread_idx (interactive) and
--     runs_one_unfinished_background_run_per_agent (at most one background run).
-- Plain CREATE INDEX (migrations run in one transaction): on a large table build the two
-- history indexes beforehand with CREATE INDEX CONCURRENTLY under these names and this
-- migration finds them in place. The unfinished-run index holds queued and running runs
-- only and is rebuilt here.
create index if not exists runs_agent_history_idx
on runlane.runs (agent_id, created_at, run_id)
where state not in ('queued', 'running');

create index if not exists runs_thread_history_idx
on runlane.runs (agent_id, thread_id, run_id)
where thread_id is not null and state not in ('queued', 'running');

drop index runlane.runs_unfinished_agent_idx;

create index runs_unfinished_agent_idx
on runlane.runs (agent_id, lane, created_at, run_id)
where state in ('queued', 'running');

drop index if exists runlane.runs_agent_newest_idx;

drop index if exists runlane.runs_thread_idx;
