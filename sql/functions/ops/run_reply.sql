-- run_reply: a run's reply as a person reads it, and the thread it answers in, for the
-- dashboard's run page.
--
-- Guarantees: RL008 for an unknown run (or another organization's, for a login scoped to
-- one: runlane._api_org); 22004 for a null id. Otherwise one row: the run's thread_id
-- (NULL for a run without a thread); reply, the bodies of its visible outputs (the kinds
-- outputs_since pages) that no later attempt superseded (output_id past
-- superseded_through), joined in output_id order with nothing between them, as the
-- chunks were streamed ('' before any); parts, how many outputs it joins; and
-- reply_chars, its length. The reply is user-facing content: runlane_api reads it (it
-- may read the outputs anyway), and the dashboard shows it only with --show-content.
-- Read-only.
create or replace function runlane.run_reply(p_run_id bigint)
returns table (
    thread_id text,
    reply text,
    parts int,
    reply_chars int
)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_thread text;
    v_org text;  -- the run's
    v_after bigint;
begin
    if p_run_id is null then
        raise exception 'run id is required'
            using errcode = '22004';
    end if;
    -- (a login held to one organization, or a session naming one, reads by the whole key:
    -- on Citus the call then stays on that organization's node)
    if v_scope is null then
        select r.thread_id, r.org_id into v_thread, v_org
        from runlane.runs as r
        where r.run_id = run_reply.p_run_id;
    else
        select r.thread_id, r.org_id into v_thread, v_org
        from runlane.runs as r
        where r.run_id = run_reply.p_run_id and r.org_id = v_scope;
    end if;
    if not found then
        raise exception 'unknown run %', p_run_id
            using errcode = 'RL008',
                  hint = 'check the run id; a login scoped to one organization sees only its runs';
    end if;
    v_after := runlane.superseded_through(p_run_id);

    if to_regclass('runlane.agent_orgs') is null then
        -- (before 0029: by run id alone; before 0027 outputs name no organization)
        return query
        select
            v_thread,
            coalesce(string_agg(o.body, '' order by o.output_id), ''),
            count(*)::int,
            coalesce(sum(char_length(o.body)), 0)::int
        from runlane.run_outputs as o
        where o.run_id = run_reply.p_run_id
          and o.output_id > v_after
          and o.kind in ('text', 'final', 'message_tool', 'card');
        return;
    end if;
    return query
    select
        v_thread,
        coalesce(string_agg(o.body, '' order by o.output_id), ''),
        count(*)::int,
        coalesce(sum(char_length(o.body)), 0)::int
    from runlane.run_outputs as o
    where o.run_id = run_reply.p_run_id
      and o.org_id = v_org
      and o.output_id > v_after
      and o.kind in ('text', 'final', 'message_tool', 'card');
end;
$$;

comment on function runlane.run_reply(bigint) is
'A run''s thread and its reply: the visible outputs no later attempt superseded, joined in '
'order. RL008 unknown run.';

revoke all on function runlane.run_reply(bigint) from public;
grant execute on function runlane.run_reply(bigint) to runlane_api;
