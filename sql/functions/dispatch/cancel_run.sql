-- cancel_run: the user's "Stop" on a run.
--
-- Guarantees (the run row is locked first, then its thread: runlane._thread_lock's order):
-- * queued (also parked with a far wake time, or waiting for its computer): closed at
--   once through runlane._close_run as canceled / canceled, with its 'run.finished'
--   journal row; it no longer holds its agent's unfinished-background-run slot or its
--   thread, so the next Run now or message makes a new run. Messages attached to it stay
--   attached to the canceled run (the user stopped them); none can be held behind a
--   queued run. Returns 'canceled'.
-- * running: the request is recorded (reason 'cancel_requested' and a
--   'run.cancel_requested' journal row, once) and its worker is told on runlane_runs
--   ({"cancel": run_id, "lane": lane} through runlane._notify, sent again on every call);
--   from then on the run writes no output, checkpoint or steering take (RL001,
--   runlane._refuse_stopped), its heartbeat answers false (the Stop reaches a worker
--   that missed the notification within one beat), and its finish, retry, release or
--   reaping closes it as canceled / canceled: its computer is freed, held messages of its
--   thread go to a follow-up run as on any finish, it is never retried or reclaimed.
--   Returns 'running' (the stop is on its way).
-- * finished (succeeded, failed, canceled, skipped): unchanged; returns its state.
-- * RL008 for an unknown run or another organization's (a login scoped to one); 22004
--   for a null id.
create or replace function runlane.cancel_run(p_run_id bigint)
returns text
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_run runlane.runs;
    v_org text;
begin
    if p_run_id is null then
        raise exception 'run id is required'
            using errcode = '22004';
    end if;

    -- (the run's organization first, then the lock by the whole key: on Citus a locking
    -- read must name one organization, and a login held to one names it)
    if v_scope is null then
        select r.org_id into v_org from runlane.runs as r where r.run_id = cancel_run.p_run_id;
    else
        v_org := v_scope;
    end if;
    select r.* into v_run
    from runlane.runs as r
    where r.run_id = cancel_run.p_run_id and r.org_id = v_org
    for no key update;
    if not found then
        raise exception 'unknown run %', p_run_id
            using errcode = 'RL008';
    end if;

    if v_run.state = 'queued' then
        perform runlane._close_run(v_run, 'canceled', 'canceled', null);
        return 'canceled';
    end if;

    if v_run.state = 'running' then
        -- GUARD: the request is recorded once; a second Stop only repeats the hint.
        if v_run.reason is distinct from 'cancel_requested' then
            update runlane.runs as r
            set reason = 'cancel_requested'
            where r.run_id = v_run.run_id and r.org_id = v_run.org_id;

            perform runlane._write_run_events(
                array[v_run.run_id], array[v_run.org_id], 'run.cancel_requested',
                array[jsonb_build_object('attempt', v_run.attempts)]
            );
        end if;
        -- A hint: a worker that misses it learns the Stop from its next heartbeat.
        perform runlane._notify(
            'runlane_runs',
            json_build_object('cancel', v_run.run_id, 'lane', v_run.lane)::text
        );
        return 'running';
    end if;

    return v_run.state;  -- finished: left as it is
end;
$$;

comment on function runlane.cancel_run(bigint) is
'Stop: a queued run is canceled at once; a running one is asked to stop (its worker ends it '
'canceled, nothing more is written); a finished one is unchanged. Returns the state after the '
'call. RL008 unknown run.';

revoke all on function runlane.cancel_run(bigint) from public;
grant execute on function runlane.cancel_run(bigint) to runlane_api;
