-- 0026 — each chat thread's lock row names the thread's newest interactive run, so that
-- a message finds the run that answers it by primary key. Searching runs for the
-- thread's unfinished interactive run has no plan that stays right for every queue
-- (a plan cached on an empty queue walks the whole interactive queue), so it was planned
-- again on every message: most of what accepting a message cost.
--
-- latest_run_id: the thread's newest interactive run as the functions recorded it when
-- they created it; 0 for a thread whose row was created before any run of it; NULL
-- where nothing was recorded yet (rows older than this column, or written by a session
-- still running the earlier functions): the next message on the thread searches runs
-- once and records what it found (runlane._lock_thread).
--
-- A thread with an unfinished interactive run also gets its row here when it has none (a
-- thread older than the lock rows, 0005), with NULL: from now on a thread without a row
-- has no unfinished interactive run, which is what lets a new thread skip the search.
--
-- ADD COLUMN without a default writes no row; ACCESS EXCLUSIVE on threads, briefly.
alter table runlane.threads add column latest_run_id bigint;

comment on column runlane.threads.latest_run_id is
'The thread''s newest interactive run (0: none yet; NULL: not recorded, searched once).';

insert into runlane.threads (agent_id, thread_id)
select distinct
    r.agent_id,
    r.thread_id
from runlane.runs as r
where
    r.lane = 'interactive'
    and r.state in ('queued', 'running')
    and r.thread_id is not null
on conflict do nothing;

comment on table runlane.threads is
'The lock row of each chat thread (runlane._lock_thread) and its newest interactive run.';
