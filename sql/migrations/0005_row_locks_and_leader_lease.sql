-- 0005 — locks only runlane can take: a row per chat thread (runlane._thread_lock) and
-- the maintenance leader's lease row (runlane.lead_maintenance). Before it both were
-- advisory locks on well-known keys that any login (with no runlane grant at all) could
-- take and hold: then no worker would lead maintenance, and a thread's submit_message would
-- wait for ever. Rows in the runlane schema can be locked only through runlane's functions
-- (the schema is closed to public, and no role but the owner has table privileges).
-- The agent lock (runlane._lock_agent) locks the agent's existing row in runlane.agents.

-- One row per chat thread that ever had a message, created by its first _thread_lock.
-- It holds nothing but the lock: the thread's messages and runs live in their tables.
create table runlane.threads (
    agent_id text not null,
    thread_id text not null,
    created_at timestamptz not null default now(),
    primary key (agent_id, thread_id)
);

comment on table runlane.threads is
'The lock row of each chat thread (runlane._thread_lock); holds no state of its own.';

-- The maintenance leader's lease: won with runlane.lead_maintenance when free or lapsed,
-- renewed only by its holder, lapsing with the holder's liveness (no session to keep).
create table runlane.leader (
    role text primary key check (role = 'maintenance'),
    leader text not null,
    acquired_at timestamptz not null,
    renewed_at timestamptz not null,
    expires_at timestamptz not null,
    check (expires_at > renewed_at)
);

comment on table runlane.leader is
'Leases of singleton roles (maintenance): holder, when won, last renewal and expiry.';

revoke all on runlane.threads, runlane.leader from public;
