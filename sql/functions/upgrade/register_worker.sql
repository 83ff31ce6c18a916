-- register_worker: a new-generation worker announces itself in the registry and keeps
-- its row fresh (call it at start and periodically); p_stopped marks a clean exit.
--
-- Guarantees: one row per worker id, generation 2, deliveries 'direct', the handlers it
-- serves (p_handlers; null: any handler) and, when given, the host and process it runs
-- as (what the dashboard's workers page shows); heartbeat_at is the time of the last
-- call. The
-- contract step reads the registry only for older
-- generations, so this is for operators (`runlane upgrade-status`, `runlane status`).
create or replace function runlane.register_worker(
    p_worker_id text,
    p_lanes text[],
    p_stopped boolean,
    p_handlers text[],
    p_host text default null,
    p_pid int default null
)
returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    -- (a value, not a call, in the upsert: Citus refuses a function in DO UPDATE SET on
    -- the registry, a reference table)
    v_now timestamptz := now();
begin
    if p_worker_id is null or btrim(p_worker_id) = '' then
        raise exception 'a worker id is required'
            using errcode = '22004';
    end if;
    perform runlane._check_id('worker id', p_worker_id);
    if p_lanes is null or not p_lanes <@ array['interactive', 'background'] then
        raise exception 'lanes must be interactive and/or background, got %', p_lanes
            using errcode = '22023';
    end if;
    if p_handlers is not null and (cardinality(p_handlers) not between 1 and 64 or exists (
        select 1 from unnest(p_handlers) as h (name)
        where h.name is null or h.name !~ '^[a-z0-9_.-]{1,64}$'
    )) then
        raise exception 'handlers must be 1 to 64 names of 1-64 characters of a-z 0-9 _ . -, got %',
            runlane._quote_for_error(p_handlers::text)
            using errcode = '22023';
    end if;

    if p_host is not null then
        perform runlane._check_id('host', p_host);
    end if;
    if p_pid is not null and p_pid <= 0 then
        raise exception 'a process id is positive, got %', p_pid
            using errcode = '22023';
    end if;

    if to_regclass('runlane.runs_handler_claim_order_idx') is null then
        -- (a schema before 0021: the registry has no handlers, and every run is of 'default')
        insert into runlane.workers as w (
            worker_id, generation, deliveries, lanes, stopped_at, host, pid
        )
        values (
            p_worker_id, 2, 'direct', p_lanes,
            case when coalesce(p_stopped, false) then v_now end,
            p_host, p_pid
        )
        on conflict (worker_id) do update
        set lanes = excluded.lanes,
            host = coalesce(excluded.host, w.host),
            pid = coalesce(excluded.pid, w.pid),
            heartbeat_at = v_now,
            stopped_at = excluded.stopped_at;
        return;
    end if;
    insert into runlane.workers as w (
        worker_id, generation, deliveries, lanes, stopped_at, handlers, host, pid
    )
    values (
        p_worker_id, 2, 'direct', p_lanes,
        case when coalesce(p_stopped, false) then v_now end,
        p_handlers, p_host, p_pid
    )
    on conflict (worker_id) do update
    set lanes = excluded.lanes,
        handlers = excluded.handlers,
        host = coalesce(excluded.host, w.host),
        pid = coalesce(excluded.pid, w.pid),
        heartbeat_at = v_now,
        stopped_at = excluded.stopped_at;
end;
$$;

comment on function runlane.register_worker(text, text[], boolean, text[], text, int) is
'Registers or refreshes a new-generation (direct dispatch) worker, the handlers it serves and '
'its host and process; '
'p_stopped marks its clean exit.';

revoke all on function runlane.register_worker(text, text[], boolean, text[], text, int) from public;
grant execute on function runlane.register_worker(text, text[], boolean, text[], text, int) to runlane_worker;

-- register_worker without handlers: a worker that claims any handler (the shape runlane
-- 0.2 workers call).
create or replace function runlane.register_worker(
    p_worker_id text,
    p_lanes text[] default '{}',
    p_stopped boolean default false
)
returns void
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
begin
    perform runlane.register_worker(p_worker_id, p_lanes, p_stopped, null);
end;
$$;

comment on function runlane.register_worker(text, text[], boolean) is
'Registers or refreshes a worker that serves any handler; p_stopped marks its clean exit.';

revoke all on function runlane.register_worker(text, text[], boolean) from public;
grant execute on function runlane.register_worker(text, text[], boolean) to runlane_worker;
