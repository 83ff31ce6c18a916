-- put_agent: create or update an agent.
--
-- Guarantees:
-- * Keys org_id and owner_id (both required to create), model (string or null = no
--   model), prompt (string), thread_id and computer_id (string or null), schedule
--   (string, '' = manual only), enabled and admin_locked (booleans), handler (1-64
--   characters of a-z 0-9 _ . -: the code that runs it; new agents 'default'): the list
--   in runlane._agent_patch_types, which get_agent reads back. An absent key keeps
--   its value; a new agent gets the column defaults. Returns the row as stored, with
--   schedule in its canonical text and next_run_at as the agents_schedule trigger sets
--   it (set when a schedule is set or a gate opens, cleared when a gate closes).
-- * Errors, writing nothing: 22023 for an unknown key or a value of the wrong type
--   (naming the key and the accepted ones), for a blank id value, and for a missing
--   org_id or owner_id when the agent is new, and for a prompt over 1 MB; RL006 invalid schedule and RL007 (the
--   owner's or organization's zone, checked where it is stored) from the trigger;
--   RL008 for an unknown organization (also, for a login scoped to one, any other
--   organization: runlane._api_org) and for an owner who is not a user of the agent's
--   organization; 23505 "agent id … is taken" when the patch names an organization other
--   than the one the agent id belongs to (an agent never moves: its runs, messages and
--   budget belong to its organization).
-- * For a login scoped to one organization, another organization's agent IS an unknown
--   one: the probe filters by the scope, so every answer (22023 for a patch that cannot
--   create, RL008 for an unknown owner, …) and the work behind it are an unknown id's,
--   up to the one thing a taken id cannot do: be created. That answers 23505, the same
--   message whichever organization holds the id and whoever asks, and says nothing else
--   (not the organization, nor anything of the agent).
-- * A changed handler moves the agent's queued runs with it, under the agent's row lock
--   `for update`: no run of the agent is created with the old handler after it commits.
-- * Concurrent creations of one id: one inserts, the others patch the row it wrote.
-- * The row is locked `for no key update`: a call left open in a slow request blocks only
--   other patches of the same row, never new runs of the agent (their foreign-key checks) nor a claim.
create or replace function runlane.put_agent(p_agent_id text, p_patch jsonb)
returns runlane.agents
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_row runlane.agents;
    v_key text;
    v_new boolean;
    v_free boolean := true;  -- a new agent's id is this organization's or nobody's
    v_home text;  -- the organization the id's namespace row names (from 0029)
begin
    perform runlane._check_id('agent id', p_agent_id);
    perform runlane._check_patch('agent', p_patch, runlane._agent_patch_types());
    if p_patch ->> 'handler' !~ '^[a-z0-9_.-]{1,64}$' then
        raise exception 'handler must be 1-64 characters of a-z 0-9 _ . -, got %',
            runlane._quote_for_error(p_patch ->> 'handler')
            using errcode = '22023',
                  hint = 'A worker serves it as runlane worker --agent NAME=module:attr.';
    end if;
    if p_patch ? 'handler' and to_regclass('runlane.runs_handler_claim_order_idx') is null then
        raise exception 'handlers need migration 0021'
            using errcode = '0A000',
                  hint = 'Run runlane migrate to the latest version first.';
    end if;
    foreach v_key in array array['org_id', 'owner_id', 'model', 'thread_id', 'computer_id'] loop
        if jsonb_typeof(p_patch -> v_key) = 'string' then
            perform runlane._check_id(replace(v_key, '_', ' '), p_patch ->> v_key);
        end if;
    end loop;
    if p_patch ? 'org_id' and (
        p_patch ->> 'org_id' <> coalesce(v_scope, p_patch ->> 'org_id')
        or not exists (select 1 from runlane.platform_settings as s where s.org_id = p_patch ->> 'org_id')
    ) then
        raise exception 'unknown organization %', runlane._quote_for_error(p_patch ->> 'org_id')
            using errcode = 'RL008',
                  hint = 'Create it with runlane.put_org first; a login limited to one organization '
                      || 'manages only that organization.';
    end if;

    -- (FOR NO KEY UPDATE: agent_id never changes, and a stronger lock would hold up the
    -- foreign-key checks of the agent's runs' writes until this transaction ends)
    if to_regclass('runlane.agent_orgs') is not null then
        -- (from 0029 the id's organization is read first, and the row by its whole key:
        -- on Citus a locking read must name one organization)
        select o.org_id into v_home from runlane.agent_orgs as o where o.agent_id = p_agent_id;
        select * into v_row from runlane.agents as a
        where a.agent_id = p_agent_id and a.org_id = v_home and (v_scope is null or a.org_id = v_scope)
        for no key update;
    else
        select * into v_row from runlane.agents as a
        where a.agent_id = p_agent_id and (v_scope is null or a.org_id = v_scope)
        for no key update;
    end if;
    v_new := not found;
    if v_new then
        if not (p_patch ? 'org_id' and p_patch ? 'owner_id') then
            raise exception 'a new agent needs the keys ''org_id'' and ''owner_id'' (agent % does not exist)',
                runlane._quote_for_error(p_agent_id)
                using errcode = '22023',
                      hint = 'Accepted keys: admin_locked, computer_id, enabled, handler, model, org_id, '
                          || 'owner_id, prompt, schedule, thread_id.';
        end if;
        v_row := null;
        v_row.agent_id := p_agent_id;
        v_row.org_id := p_patch ->> 'org_id';
        v_row.owner_id := p_patch ->> 'owner_id';
        v_row.enabled := true;
        v_row.admin_locked := false;
        v_row.prompt := '';
        v_row.schedule := '';
    end if;

    if p_patch ? 'org_id' and p_patch ->> 'org_id' <> v_row.org_id then
        raise exception 'agent id % is taken', runlane._quote_for_error(p_agent_id)
            using errcode = '23505',
                  hint = 'Agent ids are unique across the organizations of this database and an agent never moves '
                      || 'to another one: choose another id (ids that carry the organization, or random ids, '
                      || 'never collide).';
    end if;

    if p_patch ? 'owner_id' then
        v_row.owner_id := p_patch ->> 'owner_id';
    end if;
    if p_patch ? 'owner_id' and not exists (
        select 1 from runlane.users as u
        where u.user_id = v_row.owner_id and u.org_id = v_row.org_id
    ) then
        raise exception 'unknown user % in organization %',
            runlane._quote_for_error(v_row.owner_id), runlane._quote_for_error(v_row.org_id)
            using errcode = 'RL008',
                  hint = 'The owner is a user of the agent''s organization: create them with runlane.put_user first.';
    end if;
    if p_patch ? 'model' then
        v_row.model := p_patch ->> 'model';
    end if;
    if p_patch ? 'prompt' then
        v_row.prompt := p_patch ->> 'prompt';
        perform runlane._check_body('prompt', v_row.prompt);
    end if;
    if p_patch ? 'thread_id' then
        v_row.thread_id := p_patch ->> 'thread_id';
    end if;
    if p_patch ? 'computer_id' then
        v_row.computer_id := p_patch ->> 'computer_id';
    end if;
    if p_patch ? 'schedule' then
        v_row.schedule := p_patch ->> 'schedule';
    end if;
    if p_patch ? 'enabled' then
        v_row.enabled := (p_patch ->> 'enabled')::boolean;
    end if;
    if p_patch ? 'admin_locked' then
        v_row.admin_locked := (p_patch ->> 'admin_locked')::boolean;
    end if;

    if v_new then
        -- GUARD: the id's one organization (runlane.agent_orgs, from 0029) is claimed first:
        -- a creator in a second organization waits here for the first, then finds it taken.
        if to_regclass('runlane.agent_orgs') is not null then
            insert into runlane.agent_orgs as o (agent_id, org_id)
            values (p_agent_id, v_row.org_id)
            on conflict (agent_id) do nothing;
            -- (and no agent of another organization has the id: one written by hand, without
            -- its namespace row)
            -- (select 1, not a bare select: Citus cannot plan one without columns)
            v_free := (
                found or exists (
                    select 1 from runlane.agent_orgs as o where o.agent_id = p_agent_id and o.org_id = v_row.org_id
                )
            ) and not exists (
                select 1 from runlane.agents as a where a.agent_id = p_agent_id and a.org_id <> v_row.org_id
            );
        end if;
        -- a concurrent creator of the same id makes this raise 23505 only if it committed
        -- in between; on conflict turns that into a patch of its row on the next pass
        if v_free then
            insert into runlane.agents (
                agent_id, org_id, owner_id, enabled, admin_locked, model, prompt,
                thread_id, computer_id, schedule
            ) values (
                v_row.agent_id, v_row.org_id, v_row.owner_id, v_row.enabled, v_row.admin_locked,
                v_row.model, v_row.prompt, v_row.thread_id, v_row.computer_id, v_row.schedule
            )
            on conflict on constraint agents_pkey do nothing
            returning * into v_row;
        end if;
        if v_free and found then
            if p_patch ? 'handler' then  -- (a new agent has no runs yet)
                update runlane.agents as a
                set handler = p_patch ->> 'handler'
                where a.agent_id = p_agent_id and a.org_id = v_row.org_id
                returning * into strict v_row;
            end if;
            return v_row;
        end if;
        -- GUARD: taken by an agent the caller cannot see (another organization's)
        if not exists (
            select 1 from runlane.agents as a
            where a.agent_id = p_agent_id and (v_scope is null or a.org_id = v_scope)
        ) then
            raise exception 'agent id % is taken', runlane._quote_for_error(p_agent_id)
                using errcode = '23505',
                      hint = 'Agent ids are unique across the organizations of this database and an agent never moves '
                      || 'to another one: choose another id (ids that carry the organization, or random ids, '
                      || 'never collide).';
        end if;
        return runlane.put_agent(p_agent_id, p_patch);  -- created meanwhile: patch it
    end if;

    update runlane.agents as a
    set owner_id = v_row.owner_id,
        enabled = v_row.enabled,
        admin_locked = v_row.admin_locked,
        model = v_row.model,
        prompt = v_row.prompt,
        thread_id = v_row.thread_id,
        computer_id = v_row.computer_id,
        schedule = v_row.schedule
    where a.agent_id = p_agent_id and a.org_id = v_row.org_id
    returning * into strict v_row;
    if p_patch ? 'handler' and p_patch ->> 'handler' is distinct from v_row.handler then
        -- FOR UPDATE, the one lock that waits for the KEY SHARE of a message being sent:
        -- the runs such messages create are committed (and moved below) before this goes
        -- on, and a message sent from now on waits and reads the new handler.
        perform 1 from runlane.agents as a
        where a.agent_id = p_agent_id and a.org_id = v_row.org_id
        for update;
        update runlane.agents as a
        set handler = p_patch ->> 'handler'
        where a.agent_id = p_agent_id and a.org_id = v_row.org_id
        returning * into strict v_row;
        -- (runs_unfinished_agent_idx; a running run keeps the handler it was claimed for)
        update runlane.runs as r
        set handler = v_row.handler
        where r.agent_id = p_agent_id
          and r.org_id = v_row.org_id
          and r.state = 'queued'
          and r.handler <> v_row.handler;
    end if;
    return v_row;
end;
$$;

comment on function runlane.put_agent(text, jsonb) is
'Create or patch an agent (org_id and owner_id required to create); 22023 unknown key or wrong type, '
'RL006 schedule, RL007 zone, RL008 unknown or foreign organization, owner or agent.';

revoke all on function runlane.put_agent(text, jsonb) from public;
grant execute on function runlane.put_agent(text, jsonb) to runlane_api;
