-- _run_has_outputs: whether a run wrote any output.
--
-- Guarantees: true when runlane.run_outputs holds a row of run p_run_id. From 0027 on the
-- read names the run's organization p_org_id (on Citus it reaches that node alone);
-- before, outputs name no organization and the run id alone finds them. One probe of
-- run_outputs' run index. Private: for the passes that lock a pristine timer run (tick,
-- cancel_redundant_timer_runs), which read outputs apart from the run they lock: on Citus
-- a locking read reaches one node, and before 0027 outputs cannot name theirs.
create or replace function runlane._run_has_outputs(p_run_id bigint, p_org_id text)
returns boolean
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
begin
    if runlane._rows_name_their_org() then
        return exists (
            select 1 from runlane.run_outputs as o
            where o.run_id = p_run_id and o.org_id = p_org_id
        );
    end if;
    return exists (select 1 from runlane.run_outputs as o where o.run_id = p_run_id);
end;
$$;

comment on function runlane._run_has_outputs(bigint, text) is
'Whether the run wrote any output (read on its organization''s rows from 0027 on).';

revoke all on function runlane._run_has_outputs(bigint, text) from public;
