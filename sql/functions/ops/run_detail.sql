-- run_detail: one run as a developer looks at it, for `runlane run ID` and the error
-- column of `runlane journal`.
--
-- Guarantees: RL008 for an unknown run (or another organization's, for a login scoped to
-- one: runlane._api_org); 22004 for a null id. Otherwise one row: the run's agent,
-- organization, lane, trigger, state, reason, attempts and max_attempts; its timestamps
-- (created, first started, first response, finished, the wake time of a queued run) and
-- queue wait, first response and total ms as run_timing measures them (origin = the source
-- message's created_at, else the run's; absent timestamps give NULL, never zero); the
-- last failed attempt's error as written by retry_run / finish_run's p_error, split into
-- error_class (the exception class when p_error reads `Class: message`, as the Python
-- runner writes it; NULL for a reason code such as iteration_cap) and error (the rest,
-- at most 1,000 characters as stored); the number of visible outputs (the kinds
-- outputs_since pages) and of all outputs; and the cost charged so far. The error can
-- quote user content (it is what the agent's exception said), so this is read by the
-- role that may read the run's outputs anyway: runlane_api (its own organization when
-- scoped). A worker writes errors and never reads them back: runlane_worker may not
-- execute it. No message text, prompt or thread id. Never writes.
create or replace function runlane.run_detail(p_run_id bigint)
returns table (
    run_id bigint,
    agent_id text,
    org_id text,
    lane text,
    trigger text,
    state text,
    reason text,
    attempts int,
    max_attempts int,
    created_at timestamptz,
    first_started_at timestamptz,
    first_response_at timestamptz,
    finished_at timestamptz,
    wake_at timestamptz,
    queue_wait_ms bigint,
    first_response_ms bigint,
    total_ms bigint,
    error_class text,
    error text,
    visible_outputs int,
    outputs int,
    cost numeric
)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_org text;  -- the run's, named in every later statement (on Citus, one node)
    v_run runlane.runs;
    v_origin timestamptz;
    v_timing jsonb;
    v_error_class text;
    v_visible int;
    v_total int;
begin
    if p_run_id is null then
        raise exception 'run id is required'
            using errcode = '22004';
    end if;
    if to_regclass('runlane.agent_orgs') is not null then  -- (0029, which Citus needs)
        -- (statement by statement, each by the whole key: on Citus the run's row cannot be
        -- handed to _timing_of inside a statement sent to its shard, whose row type differs.
        -- A login held to one organization, or a session naming one, reads the run there;
        -- else by its id, which gives its organization.)
        if v_scope is null then
            select r.* into v_run
            from runlane.runs as r
            where r.run_id = run_detail.p_run_id;
        else
            select r.* into v_run
            from runlane.runs as r
            where r.run_id = run_detail.p_run_id and r.org_id = v_scope;
        end if;
        if not found then
            raise exception 'unknown run %', p_run_id
                using errcode = 'RL008',
                      hint = 'check the run id; a login scoped to one organization sees only its runs';
        end if;
        v_org := v_run.org_id;
        if v_run.source_message_id is not null then
            select m.created_at into v_origin
            from runlane.messages as m
            where m.message_id = v_run.source_message_id and m.org_id = v_org;
        end if;
        v_timing := runlane._timing_of(v_run, coalesce(v_origin, v_run.created_at));
        select
            count(*) filter (where x.kind in ('text', 'final', 'message_tool', 'card'))::int,
            count(*)::int
        into v_visible, v_total
        from runlane.run_outputs as x
        where x.run_id = run_detail.p_run_id and x.org_id = v_org;
        v_error_class := substring(v_run.last_error from '^([A-Za-z_][A-Za-z0-9_.]*): ');
        return query
        select
            v_run.run_id,
            v_run.agent_id,
            v_run.org_id,
            v_run.lane,
            v_run.trigger,
            v_run.state,
            v_run.reason,
            v_run.attempts,
            v_run.max_attempts,
            v_run.created_at,
            v_run.first_started_at,
            v_run.first_response_at,
            v_run.finished_at,
            case when v_run.state = 'queued' then v_run.wake_at end,
            (v_timing ->> 'run.queue_wait_ms')::bigint,
            (v_timing ->> 'run.first_response_ms')::bigint,
            (v_timing ->> 'run.total_ms')::bigint,
            v_error_class,
            case
                when v_error_class is null then v_run.last_error
                else substr(v_run.last_error, char_length(v_error_class) + 3)
            end,
            v_visible,
            v_total,
            v_run.cost;
        return;
    end if;

    -- (before 0029: by run id alone; before 0027 outputs name no organization)

    return query
    select
        r.run_id,
        r.agent_id,
        r.org_id,
        r.lane,
        r.trigger,
        r.state,
        r.reason,
        r.attempts,
        r.max_attempts,
        r.created_at,
        r.first_started_at,
        r.first_response_at,
        r.finished_at,
        case when r.state = 'queued' then r.wake_at end,
        (t.timing ->> 'run.queue_wait_ms')::bigint,
        (t.timing ->> 'run.first_response_ms')::bigint,
        (t.timing ->> 'run.total_ms')::bigint,
        e.error_class,
        case
            when e.error_class is null then r.last_error
            else substr(r.last_error, char_length(e.error_class) + 3)
        end,
        o.visible,
        o.total,
        r.cost
    from runlane.runs as r
    left join runlane.messages as m on m.message_id = r.source_message_id
    -- the one definition of a run's timing (run_timing's), not a second copy of it
    cross join lateral (
        select runlane._timing_of(r, coalesce(m.created_at, r.created_at)) as timing
    ) as t
    cross join lateral (
        select substring(r.last_error from '^([A-Za-z_][A-Za-z0-9_.]*): ') as error_class
    ) as e
    cross join lateral (
        select
            count(*) filter (
                where x.kind in ('text', 'final', 'message_tool', 'card')
            )::int as visible,
            count(*)::int as total
        from runlane.run_outputs as x
        where x.run_id = r.run_id
    ) as o
    where r.run_id = run_detail.p_run_id
      and (v_scope is null or r.org_id = v_scope);
    if not found then
        raise exception 'unknown run %', p_run_id
            using errcode = 'RL008',
                  hint = 'check the run id; a login scoped to one organization sees only its runs';
    end if;
end;
$$;

comment on function runlane.run_detail(bigint) is
'One run: agent, lane, trigger, state, reason, attempts, timestamps and timing ms, the last '
'error (class and message), visible and all output counts, cost. RL008 unknown run.';

revoke all on function runlane.run_detail(bigint) from public;
revoke all on function runlane.run_detail(bigint) from runlane_worker;
grant execute on function runlane.run_detail(bigint) to runlane_api;
