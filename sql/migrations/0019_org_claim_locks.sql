-- 0019 — the lock row of each organization's background claims: runlane.org_claim_locks.
--
-- Why: claim_runs serializes the claims of one organization's background runs, so that
-- its running count is taken after every concurrent claim of it committed and the cap
-- (platform_settings.agent_max_concurrency) stays exact. It locked the organization's
-- platform_settings row for that, a row put_org locks too: one API transaction left open
-- after put_org (a slow request) made every background claim that met that organization
-- wait lock_timeout and fail whole, for every organization. A row of this table is locked
-- by claim_runs only: no role but the owner has a privilege on it and no function other
-- than claim_runs locks it, so claimers wait only for each other, briefly.
--
-- One row per organization: backfilled here, added by the trigger on platform_settings
-- (runlane.tg_platform_settings__claim_lock) and, for an organization created before that
-- trigger is in place, by its first background claim. No foreign key: locking a row here
-- never touches the platform_settings row, and inserting one never waits for its lock.
create table runlane.org_claim_locks (
    org_id text primary key
);
comment on table runlane.org_claim_locks is
'One row per organization, locked only by claim_runs to serialize the organization''s '
'background claims (its cap); holds nothing else.';
revoke all on table runlane.org_claim_locks from public;

insert into runlane.org_claim_locks (org_id)
select s.org_id
from runlane.platform_settings as s
on conflict (org_id) do nothing;
