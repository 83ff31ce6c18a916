-- 0009 — idempotency keys for the keyed forms of submit_message and run_now.
--
-- runlane.idempotency_keys holds one row per (agent, key): what the call was (kind and a
-- hash of its other arguments) and what it answered. The primary key is the guarantee:
-- the keyed functions insert the key row FIRST (insert … on conflict do nothing), so a
-- second caller with the same key waits on the first one's uncommitted row and then reads
-- its answer; a first call that fails rolls its key row back with everything else.
--
-- Expiry: a key lives as long as what it created. message_id and run_id cascade on
-- delete, so purging a run (and its messages) deletes its keys; nothing deletes a key
-- earlier.

create table runlane.idempotency_keys (
    agent_id text not null references runlane.agents (agent_id) on delete cascade,
    idempotency_key text not null,
    kind text not null,
    request_hash bytea not null,
    message_id bigint null references runlane.messages (message_id) on delete cascade,
    run_id bigint null references runlane.runs (run_id) on delete cascade,
    disposition text null,
    response jsonb null,
    created_at timestamptz not null default now(),
    constraint idempotency_keys_pkey primary key (agent_id, idempotency_key),
    constraint idempotency_keys_kind check (kind in ('submit_message', 'run_now'))
);
comment on table runlane.idempotency_keys is
'One row per (agent, idempotency key) of the keyed submit_message / run_now: the request '
'hash and the first answer. Deleted with the message or run it names (purge).';
revoke all on table runlane.idempotency_keys from public;

-- The cascades when a message or a run is purged.
create index idempotency_keys_message_idx on runlane.idempotency_keys (message_id)
where message_id is not null;
create index idempotency_keys_run_idx on runlane.idempotency_keys (run_id)
where run_id is not null;
