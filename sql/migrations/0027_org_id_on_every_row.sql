-- 0027 — every row an organization owns names it: org_id on threads, run_outputs,
-- run_events, idempotency_keys, charge_buckets and computer_leases, the six tables that
-- reached their organization only through a run, an agent or a user.
--
-- Why: on Citus (runlane migrate --citus) a table is distributed by org_id, and a row
-- without it cannot be placed on its organization's node; on plain PostgreSQL a row
-- that names its organization is checked against it by the keys that follow.
--
-- The functions write org_id on every new row once this column exists (they check
-- runlane.run_events.org_id: all six columns come in this one transaction). The rows
-- written before are filled here for the four tables whose rows are one per thread,
-- request, owner bucket or computer, and by 0028 for run_outputs and run_events, which
-- grow with every step of every run and are written nowhere else: 0028 holds no lock
-- that stops a worker.
--
-- ACCESS EXCLUSIVE on the six tables while the columns are added (no row written), and
-- on the four small ones while their rows are filled: about a second per million rows.
alter table runlane.threads add column org_id text;
alter table runlane.run_outputs add column org_id text;
alter table runlane.run_events add column org_id text;
alter table runlane.idempotency_keys add column org_id text;
alter table runlane.charge_buckets add column org_id text;
alter table runlane.computer_leases add column org_id text;

update runlane.threads as t
set org_id = a.org_id
from runlane.agents as a
where a.agent_id = t.agent_id;

update runlane.idempotency_keys as k
set org_id = a.org_id
from runlane.agents as a
where a.agent_id = k.agent_id;

update runlane.charge_buckets as b
set org_id = u.org_id
from runlane.users as u
where u.user_id = b.owner_id;

update runlane.computer_leases as cl
set org_id = r.org_id
from runlane.runs as r
where r.run_id = cl.run_id;

comment on column runlane.threads.org_id is 'The organization of the thread''s agent.';
comment on column runlane.run_outputs.org_id is 'The organization of the output''s run.';
comment on column runlane.run_events.org_id is 'The organization of the event''s run.';
comment on column runlane.idempotency_keys.org_id is 'The organization of the key''s agent.';
comment on column runlane.charge_buckets.org_id is 'The organization of the bucket''s owner.';
comment on column runlane.computer_leases.org_id is
'The organization of the run holding (or last holding) the lease.';
