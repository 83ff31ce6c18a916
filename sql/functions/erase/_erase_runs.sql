-- _erase_runs: deletes finished runs of one organization with every row that carries
-- their content.
--
-- Guarantees, for runs of p_org_id the caller has locked and found finished (an erase_*
-- function, after its 55006 check):
-- * Deletes their outputs, their journal (run_events), any computer lease naming them,
--   the idempotency keys that answer with them or with their messages, their messages
--   and the runs themselves; returns the number of runs deleted.
-- * Their charges stay as amounts without content (owner, organization, attempt,
--   amount, time; run_id set to null), so every owner's weekly_spend is the same after
--   the erasure as before it. Retention deletes them with the runs of their age
--   (runlane.purge_finished).
-- * Every statement names the organization (on Citus: its node alone); the tables that
--   name no organization before 0027 are read by run id there.
-- Claim receipts may keep the numbers of erased runs (no content; a replay leaves out a
-- run that is gone, and retention deletes old receipts).
create or replace function runlane._erase_runs(p_runs bigint[], p_org_id text)
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
    where ch.run_id = any(p_runs)
      and ch.org_id = p_org_id;

    if runlane._rows_name_their_org() then
        delete from runlane.run_outputs as o
        where o.run_id = any(p_runs) and o.org_id = p_org_id;

        delete from runlane.run_events as e
        where e.run_id = any(p_runs) and e.org_id = p_org_id;

        delete from runlane.idempotency_keys as k
        where k.org_id = p_org_id
          and (
              k.run_id = any(p_runs)
              or k.message_id in (
                  select m.message_id from runlane.messages as m
                  where m.run_id = any(p_runs) and m.org_id = p_org_id
              )
          );
    else  -- (before 0027)
        delete from runlane.run_outputs as o
        where o.run_id = any(p_runs);

        delete from runlane.run_events as e
        where e.run_id = any(p_runs);

        delete from runlane.idempotency_keys as k
        where k.run_id = any(p_runs)
           or k.message_id in (select m.message_id from runlane.messages as m where m.run_id = any(p_runs));
    end if;

    -- (every organization's leases in one table: on Citus a copy on every node)
    delete from runlane.computer_leases as cl
    where cl.run_id = any(p_runs);

    -- A run may name a message of its own as its source: unlink, then delete.
    update runlane.runs as r
    set source_message_id = null
    where r.run_id = any(p_runs)
      and r.org_id = p_org_id
      and r.source_message_id is not null;

    delete from runlane.messages as m
    where m.run_id = any(p_runs)
      and m.org_id = p_org_id;

    delete from runlane.runs as r
    where r.run_id = any(p_runs)
      and r.org_id = p_org_id;

    return cardinality(p_runs);
end;
$$;

comment on function runlane._erase_runs(bigint[], text) is
'Deletes finished, locked runs of one organization with their outputs, journal, leases, keys and '
'messages; their charges stay without the run (weekly spend unchanged).';

revoke all on function runlane._erase_runs(bigint[], text) from public;
