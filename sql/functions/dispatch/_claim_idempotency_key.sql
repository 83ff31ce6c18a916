-- _claim_idempotency_key: the first step of a keyed call (submit_message, run_now).
--
-- Guarantees:
-- * Inserts the key row (agent, key) FIRST, with insert … on conflict do nothing: the
--   primary key decides, never a read-then-write. A concurrent caller with the same key
--   waits here for the first caller's transaction (at most the caller's lock_timeout):
--   when it commits, this reads its answer; when it rolls back, this call inserts the key
--   and goes first.
-- * Returns NULL when this call owns the key (it must do the work and then store its
--   answer in the key row, in the same transaction); else the stored row of the earlier
--   call as jsonb (jsonb, not the row type: function files are installed on schemas older
--   than the table, see migrate.py), whose answer the caller returns, creating nothing.
-- * RL010 when the key was used for another kind of call or other arguments
--   (p_request_hash differs): a key names one request.
-- * Before any key is read: 22004 for a null key, 22023 for a blank or over-long one
--   (_check_id), RL008 for an unknown agent or another organization's (runlane._api_org,
--   word for word the unknown-agent error): keys leak nothing across tenants.
create or replace function runlane._claim_idempotency_key(
    p_agent_id text, p_key text, p_kind text, p_request_hash bytea
)
returns jsonb
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_row runlane.idempotency_keys;
    v_org text;  -- the agent's organization, which the key row names
begin
    -- GUARD: the key and the agent, before any key is read.
    if p_key is null then
        raise exception 'the keyed % needs an idempotency key', p_kind
            using errcode = '22004',
                  hint = format('Pass a key, or call %s without one.', p_kind);
    end if;
    perform runlane._check_id('idempotency key', p_key);
    -- (the agent read by its whole key, and the key row below by its organization: on
    -- Citus each statement then reaches the one node that holds it. A login held to one
    -- organization reads only there, so a foreign id costs what an unknown one does.)
    v_org := coalesce(v_scope, runlane._agent_org(p_agent_id));
    select a.org_id into v_org
    from runlane.agents as a
    where a.agent_id = _claim_idempotency_key.p_agent_id
      and a.org_id = v_org
      and (v_scope is null or a.org_id = v_scope);
    if not found then
        raise exception 'unknown agent %', runlane._quote_for_error(p_agent_id)
            using errcode = 'RL008';
    end if;

    -- A row can vanish between the conflict and the read only when it is purged then:
    -- try again, a bounded number of times.
    for v_round in 1..3 loop
        if runlane._rows_name_their_org() then
            insert into runlane.idempotency_keys as k (agent_id, idempotency_key, kind, request_hash, org_id)
            values (p_agent_id, p_key, p_kind, p_request_hash, v_org)
            on conflict on constraint idempotency_keys_pkey do nothing;
        else  -- (a schema before 0027: keys name no organization)
            insert into runlane.idempotency_keys as k (agent_id, idempotency_key, kind, request_hash)
            values (p_agent_id, p_key, p_kind, p_request_hash)
            on conflict on constraint idempotency_keys_pkey do nothing;
        end if;
        if found then
            return null;  -- this call owns the key
        end if;

        if runlane._rows_name_their_org() then
            select k.* into v_row
            from runlane.idempotency_keys as k
            where k.agent_id = _claim_idempotency_key.p_agent_id
              and k.idempotency_key = _claim_idempotency_key.p_key
              and k.org_id = v_org;
        else
            select k.* into v_row
            from runlane.idempotency_keys as k
            where k.agent_id = _claim_idempotency_key.p_agent_id and k.idempotency_key = _claim_idempotency_key.p_key;
        end if;
        if found then
            if v_row.kind <> p_kind or v_row.request_hash <> p_request_hash then
                raise exception 'idempotency key % of agent % was already used for another request',
                    runlane._quote_for_error(p_key), runlane._quote_for_error(p_agent_id)
                    using errcode = 'RL010',
                          hint = 'A key names one request: retry with exactly the same arguments, '
                          || 'or use a new key for a new request.';
            end if;
            return to_jsonb(v_row);
        end if;
    end loop;
    raise exception 'idempotency key % of agent % is being purged, retry',
        runlane._quote_for_error(p_key), runlane._quote_for_error(p_agent_id)
        using errcode = '40001';
end;
$$;

comment on function runlane._claim_idempotency_key(text, text, text, bytea) is
'Inserts an idempotency key first (NULL: the caller goes first) or returns the earlier call''s row; '
'RL010 when the key was used with other arguments.';

revoke all on function runlane._claim_idempotency_key(text, text, text, bytea) from public;
