-- _free_computer: a run leaving the running state gives its computer back.
--
-- Guarantees: for a run bound to a computer, deletes the lease row this run holds (its
-- own only: a lease another run took over stays) and wakes the next awake run waiting
-- for the computer (runlane._notify_computer_waiter: a hint, sent at commit). For a run
-- without a computer it does nothing, not even a delete of no row: on Citus the leases
-- are a reference table, where any delete is a commit on every node. Private: for the
-- functions that requeue or close a running run (release_run, retry_run, reap_stale,
-- runlane._close_run_with).
create or replace function runlane._free_computer(p_run runlane.runs)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if (p_run).computer_id is null then
        return;
    end if;
    delete from runlane.computer_leases as cl
    where cl.computer_id = (p_run).computer_id
      and cl.run_id = (p_run).run_id;
    perform runlane._notify_computer_waiter((p_run).computer_id);
end;
$$;

comment on function runlane._free_computer(runlane.runs) is
'Deletes the run''s own computer lease and wakes the computer''s next waiter; nothing without a '
'computer.';

revoke all on function runlane._free_computer(runlane.runs) from public;
