-- _erase_runs: deletes finished runs with every row that carries their content.
--
-- Guarantees, for runs the caller has locked and found finished (an erase_* function,
-- after its 55006 check):
-- * Deletes their outputs, their journal (run_events), any computer lease naming them,
--   the idempotency keys that answer with them or with their messages, their messages
--   and the runs themselves; returns the number of runs deleted.
-- * Their charges stay as amounts without content (owner, organization, attempt,
--   amount, time; run_id set to null), so every owner's weekly_spend is the same after
--   the erasure as before it. Retention deletes them with the runs of their age
--   (runlane.purge_finished).
-- Claim receipts may keep the numbers of erased runs (no content; a replay leaves out a
-- run that is gone, and retention deletes old receipts).
create or replace function runlane._erase_runs(p_runs bigint[])
returns int
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if cardinality(p_runs) = 0 then
        return 0;
    end if;

    update runlane.charges as ch
    set run_id = null
    where ch.run_id = any(p_runs);

    delete from runlane.run_outputs as o
    where o.run_id = any(p_runs);

    delete from runlane.run_events as e
    where e.run_id = any(p_runs);

    delete from runlane.computer_leases as cl
    where cl.run_id = any(p_runs);

    delete from runlane.idempotency_keys as k
    where k.run_id = any(p_runs)
       or k.message_id in (select m.message_id from runlane.messages as m where m.run_id = any(p_runs));

    -- A run may name a message of its own as its source: unlink, then delete.
    update runlane.runs as r
    set source_message_id = null
    where r.run_id = any(p_runs)
      and r.source_message_id is not null;

    delete from runlane.messages as m
    where m.run_id = any(p_runs);

    delete from runlane.runs as r
    where r.run_id = any(p_runs);

    return cardinality(p_runs);
end;
$$;

comment on function runlane._erase_runs(bigint[]) is
'Deletes finished, locked runs with their outputs, journal, leases, keys and messages; their '
'charges stay without the run (weekly spend unchanged).';

revoke all on function runlane._erase_runs(bigint[]) from public;
