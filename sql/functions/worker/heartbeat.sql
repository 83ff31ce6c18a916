-- heartbeat: the owner of a running run keeps its leases alive.
--
-- Guarantees: extends the run's lease (lease_expires_at = now() + p_lease, heartbeat_at =
-- now()) and the computer lease this run holds, when the caller
-- still owns the run (running, same fence) and, for a computer-bound run, still holds
-- its computer: the computer_leases row names this run and fence (expired or not; see
-- runlane._require_owner, whose rule this is). Returns true then, and false otherwise,
-- including for an unknown run: a heartbeat never raises over ownership, so the runner
-- reads false as "stop working on this run". Also false, extending nothing, for a run
-- asked to stop (runlane.cancel_run): a worker that missed the Stop notification learns
-- it from its next beat, stops the agent and finishes the run (closed as canceled); an
-- older worker that only stops leaves it to reap_stale, which closes it canceled too.
-- Bad arguments raise 22004 / 22023.
create or replace function runlane.heartbeat(
    p_run_id bigint,
    p_fence bigint,
    p_lease interval default '60 seconds'
)
returns boolean
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_owned boolean;
    v_computer text;
    v_expires timestamptz;
    v_org text;  -- runlane._run_org_for_write: on Citus the statement reaches one node
begin
    if p_run_id is null or p_fence is null or p_lease is null then
        raise exception 'run id, fence and lease are required'
            using errcode = '22004';
    end if;
    if p_lease <= interval '0' or p_lease > interval '1 hour' then
        raise exception 'lease % is out of range', p_lease
            using errcode = '22023',
                  hint = 'A lease is positive and at most 1 hour; heartbeat more often instead.';
    end if;

    -- Hot path: one statement for a run without a computer; a computer's lease follows
    -- the run's new expiry in a second one. (Not one statement with both: on Citus the
    -- computer leases are a reference table, and an update of it, even of no row, is a
    -- commit on every node.)
    v_org := runlane._run_org_for_write(p_run_id);
    update runlane.runs as r
    set lease_expires_at = now() + heartbeat.p_lease,
        heartbeat_at = now()
    where r.run_id = heartbeat.p_run_id
      and (v_org is null or r.org_id = v_org)
      and r.fence = heartbeat.p_fence
      and r.state = 'running'
      -- a run asked to stop (cancel_run) is not kept alive: false tells its worker to
      -- stop the agent (its finish then closes it canceled)
      and r.reason is distinct from 'cancel_requested'
      -- a run whose expired computer lease another run has taken over (or taken
      -- and given back) lost the computer: it must stop, not keep working beside
      -- the new owner (the rule of runlane._require_owner)
      and (r.computer_id is null or exists (
          select 1
          from runlane.computer_leases as own
          where own.computer_id = r.computer_id
            and own.run_id = r.run_id
            and own.fence = r.fence
      ))
    returning r.computer_id, r.lease_expires_at into v_computer, v_expires;
    v_owned := found;

    if v_computer is not null then
        update runlane.computer_leases as cl
        set expires_at = v_expires
        where cl.computer_id = v_computer
          and cl.run_id = heartbeat.p_run_id;
    end if;

    return v_owned;
end;
$$;

comment on function runlane.heartbeat(bigint, bigint, interval) is
'Extends the run lease and its computer lease; false (never an error) once the caller no longer owns the run.';

revoke all on function runlane.heartbeat(bigint, bigint, interval) from public;
grant execute on function runlane.heartbeat(bigint, bigint, interval) to runlane_worker;
