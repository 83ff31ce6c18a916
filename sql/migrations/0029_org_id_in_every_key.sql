-- 0029 — org_id in every key of the tables an organization owns, and the id namespaces
-- kept in two small tables of their own.
--
-- Why: Citus distributes these tables by org_id, and it enforces a primary key, a unique
-- index or a foreign key only when the key includes org_id (each organization's rows live
-- on one node; a key across nodes has no node to check it on). Plain PostgreSQL runs the
-- same keys, so both engines run one schema and one set of functions.
--
-- Each key keeps its id first and gains org_id after it ((run_id, org_id), ...): a read
-- by id alone still descends the primary key, as before. Foreign keys name both columns,
-- so a row also cannot point at another organization's run, agent, user or message.
--
-- Agent and user ids stay one namespace per database (creating an id another
-- organization holds is refused 23505, as before), and every call that names an agent
-- finds its organization: runlane.agent_orgs and runlane.user_orgs hold each id once with
-- its organization. On Citus they are reference tables (a copy on every node, read
-- locally), because a key on agent_id alone cannot be kept in a table distributed by
-- org_id. put_agent and put_user write them first; erasure deletes from them last. An
-- agent or user written by hand needs its row there too: nothing else checks its id.
--
-- Rows that name no organization can no longer be kept: a thread row or an owner's
-- spend bucket whose agent or user is gone (erasure deletes both; only a table written
-- by hand leaves them) is deleted here, and any row still without org_id is filled.
--
-- Computers stay one namespace per database: computer_leases keeps its key on
-- computer_id (a lease excludes every run of every organization that names the computer)
-- and names its run by (run_id, org_id).
--
-- ACCESS EXCLUSIVE on the tables whose keys change, while their primary keys are built
-- again and the foreign keys are checked (every row is read): on a large installation
-- build the new unique indexes beforehand with CREATE UNIQUE INDEX CONCURRENTLY under
-- the names below (*_org_key); the migration then turns them into the primary keys.

-- STEP: the namespaces of agent and user ids.
create table runlane.agent_orgs (
    agent_id text primary key,
    org_id text not null
);
comment on table runlane.agent_orgs is
'Each agent id once, with its organization: the id namespace (ids are unique per database) and '
'the route from an agent to its organization. A reference table on Citus.';
revoke all on table runlane.agent_orgs from public;

create table runlane.user_orgs (
    user_id text primary key,
    org_id text not null
);
comment on table runlane.user_orgs is
'Each user id once, with its organization: the id namespace and the route from a user to its '
'organization. A reference table on Citus.';
revoke all on table runlane.user_orgs from public;

insert into runlane.agent_orgs (agent_id, org_id)
select
    a.agent_id,
    a.org_id
from runlane.agents as a;

insert into runlane.user_orgs (user_id, org_id)
select
    u.user_id,
    u.org_id
from runlane.users as u;

-- STEP: the foreign keys on single ids go first (the keys they reference change).
alter table runlane.agents drop constraint agents_owner_id_fkey;
alter table runlane.runs drop constraint runs_agent_id_fkey;
alter table runlane.runs drop constraint runs_source_message_of_run_fk;
alter table runlane.messages drop constraint messages_agent_id_fkey;
alter table runlane.messages drop constraint messages_run_id_fkey;
alter table runlane.run_outputs drop constraint run_outputs_run_id_fkey;
alter table runlane.run_events drop constraint run_events_run_id_fkey;
alter table runlane.computer_leases drop constraint computer_leases_run_id_fkey;
alter table runlane.charges drop constraint charges_run_id_fkey;
alter table runlane.idempotency_keys drop constraint idempotency_keys_agent_id_fkey;
alter table runlane.idempotency_keys drop constraint idempotency_keys_message_id_fkey;
alter table runlane.idempotency_keys drop constraint idempotency_keys_run_id_fkey;

-- STEP: every row names its organization.
delete from runlane.threads as t
where not exists (
    select from runlane.agents as a
    where a.agent_id = t.agent_id
);

delete from runlane.charge_buckets as b
where not exists (
    select from runlane.users as u
    where u.user_id = b.owner_id
);

update runlane.threads as t
set org_id = a.org_id
from runlane.agents as a
where a.agent_id = t.agent_id and t.org_id is null;

update runlane.idempotency_keys as k
set org_id = a.org_id
from runlane.agents as a
where a.agent_id = k.agent_id and k.org_id is null;

update runlane.charge_buckets as b
set org_id = u.org_id
from runlane.users as u
where u.user_id = b.owner_id and b.org_id is null;

update runlane.computer_leases as cl
set org_id = r.org_id
from runlane.runs as r
where r.run_id = cl.run_id and cl.org_id is null;

update runlane.run_outputs as o
set org_id = r.org_id
from runlane.runs as r
where r.run_id = o.run_id and o.org_id is null;

update runlane.run_events as e
set org_id = r.org_id
from runlane.runs as r
where r.run_id = e.run_id and e.org_id is null;

alter table runlane.computer_leases alter column org_id set not null;

-- STEP: the primary keys, id first, then org_id (built beforehand under these names, or here).
create unique index if not exists users_org_key on runlane.users (user_id, org_id);
create unique index if not exists agents_org_key on runlane.agents (agent_id, org_id);
create unique index if not exists runs_org_key on runlane.runs (run_id, org_id);
create unique index if not exists messages_org_key on runlane.messages (message_id, org_id);
create unique index if not exists charges_org_key on runlane.charges (charge_id, org_id);
create unique index if not exists run_outputs_org_key on runlane.run_outputs (output_id, org_id);
create unique index if not exists run_events_org_key on runlane.run_events (event_id, org_id);
create unique index if not exists threads_org_key on runlane.threads (agent_id, thread_id, org_id);
create unique index if not exists idempotency_keys_org_key
on runlane.idempotency_keys (agent_id, idempotency_key, org_id);
create unique index if not exists charge_buckets_org_key
on runlane.charge_buckets (owner_id, bucket_start, org_id) include (amount);

alter table runlane.users drop constraint users_pkey;
alter table runlane.users add constraint users_pkey primary key using index users_org_key;
alter table runlane.agents drop constraint agents_pkey;
alter table runlane.agents add constraint agents_pkey primary key using index agents_org_key;
alter table runlane.runs drop constraint runs_pkey;
alter table runlane.runs add constraint runs_pkey primary key using index runs_org_key;
alter table runlane.messages drop constraint messages_pkey;
alter table runlane.messages add constraint messages_pkey primary key using index messages_org_key;
alter table runlane.charges drop constraint charges_pkey;
alter table runlane.charges add constraint charges_pkey primary key using index charges_org_key;
alter table runlane.run_outputs drop constraint run_outputs_pkey;
alter table runlane.run_outputs add constraint run_outputs_pkey primary key using index run_outputs_org_key;
alter table runlane.run_events drop constraint run_events_pkey;
alter table runlane.run_events add constraint run_events_pkey primary key using index run_events_org_key;
alter table runlane.threads drop constraint threads_pkey;
alter table runlane.threads add constraint threads_pkey primary key using index threads_org_key;
alter table runlane.idempotency_keys drop constraint idempotency_keys_pkey;
alter table runlane.idempotency_keys
add constraint idempotency_keys_pkey primary key using index idempotency_keys_org_key;
alter table runlane.charge_buckets drop constraint charge_buckets_pkey;
alter table runlane.charge_buckets
add constraint charge_buckets_pkey primary key using index charge_buckets_org_key;

-- The unique indexes on runs and messages gain org_id as well, under their names.
create unique index if not exists messages_run_message_org_idx
on runlane.messages (run_id, message_id, org_id);
drop index runlane.messages_run_message_idx;
alter index runlane.messages_run_message_org_idx rename to messages_run_message_idx;

create unique index if not exists runs_timer_occurrence_once_org_idx
on runlane.runs (timer_routine, timer_occurrence, org_id)
where timer_routine is not null;
drop index runlane.runs_timer_occurrence_once_idx;
alter index runlane.runs_timer_occurrence_once_org_idx rename to runs_timer_occurrence_once_idx;

create unique index if not exists runs_one_unfinished_background_run_per_agent_org
on runlane.runs (agent_id, org_id)
where lane = 'background' and state in ('queued', 'running');
drop index runlane.runs_one_unfinished_background_run_per_agent;
alter index runlane.runs_one_unfinished_background_run_per_agent_org
rename to runs_one_unfinished_background_run_per_agent;

-- STEP: the foreign keys again, each naming the organization.
alter table runlane.agents
add constraint agents_owner_id_fkey foreign key (owner_id, org_id)
references runlane.users (user_id, org_id);
alter table runlane.runs
add constraint runs_agent_id_fkey foreign key (agent_id, org_id)
references runlane.agents (agent_id, org_id);
alter table runlane.messages
add constraint messages_agent_id_fkey foreign key (agent_id, org_id)
references runlane.agents (agent_id, org_id);
alter table runlane.messages
add constraint messages_run_id_fkey foreign key (run_id, org_id)
references runlane.runs (run_id, org_id);
alter table runlane.runs
add constraint runs_source_message_of_run_fk foreign key (run_id, source_message_id, org_id)
references runlane.messages (run_id, message_id, org_id);
alter table runlane.run_outputs
add constraint run_outputs_run_id_fkey foreign key (run_id, org_id)
references runlane.runs (run_id, org_id);
alter table runlane.run_events
add constraint run_events_run_id_fkey foreign key (run_id, org_id)
references runlane.runs (run_id, org_id);
alter table runlane.computer_leases
add constraint computer_leases_run_id_fkey foreign key (run_id, org_id)
references runlane.runs (run_id, org_id);
alter table runlane.charges
add constraint charges_run_id_fkey foreign key (run_id, org_id)
references runlane.runs (run_id, org_id) on delete cascade;
alter table runlane.idempotency_keys
add constraint idempotency_keys_agent_id_fkey foreign key (agent_id, org_id)
references runlane.agents (agent_id, org_id) on delete cascade;
alter table runlane.idempotency_keys
add constraint idempotency_keys_message_id_fkey foreign key (message_id, org_id)
references runlane.messages (message_id, org_id) on delete cascade;
alter table runlane.idempotency_keys
add constraint idempotency_keys_run_id_fkey foreign key (run_id, org_id)
references runlane.runs (run_id, org_id) on delete cascade;

-- STEP: a row written without its organization gets it from its run, agent or owner
-- (runlane.tg_org_id__from_its_owner: every current function names org_id; a session
-- still running the functions of a schema before 0027, or a statement written by hand,
-- does not). `runlane migrate` installs the current functions before the migrations, so
-- the trigger function is in place on an upgrade; on a new database, where nobody writes
-- yet, its file creates the triggers.
do $triggers$
begin
    if to_regprocedure('runlane.tg_org_id__from_its_owner()') is not null then
        create or replace trigger threads_org_id before insert on runlane.threads
        for each row when (new.org_id is null) execute function runlane.tg_org_id__from_its_owner();
        create or replace trigger run_outputs_org_id before insert on runlane.run_outputs
        for each row when (new.org_id is null) execute function runlane.tg_org_id__from_its_owner();
        create or replace trigger run_events_org_id before insert on runlane.run_events
        for each row when (new.org_id is null) execute function runlane.tg_org_id__from_its_owner();
        create or replace trigger idempotency_keys_org_id before insert on runlane.idempotency_keys
        for each row when (new.org_id is null) execute function runlane.tg_org_id__from_its_owner();
        create or replace trigger charge_buckets_org_id before insert on runlane.charge_buckets
        for each row when (new.org_id is null) execute function runlane.tg_org_id__from_its_owner();
        create or replace trigger computer_leases_org_id before insert on runlane.computer_leases
        for each row when (new.org_id is null) execute function runlane.tg_org_id__from_its_owner();
    end if;
end
$triggers$;
