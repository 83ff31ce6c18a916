-- _write_run_events: the one writer of runlane.run_events, the runs' journal.
--
-- Guarantees: one row per element of p_run_ids, in array order: the run, p_event, its
-- detail (p_details, or null where the array is shorter) and, from migration 0027 on,
-- the run's organization (p_org_ids, which the caller read from the run's row). Events
-- are written by the statement that changes the run or right after it, in its
-- transaction: a journal row never outlives a change that rolled back.
create or replace function runlane._write_run_events(
    p_run_ids bigint[],
    p_org_ids text[],
    p_event text,
    p_details jsonb[]
)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if runlane._rows_name_their_org() then
        insert into runlane.run_events (run_id, org_id, event, detail)
        select e.run_id, e.org_id, p_event, e.detail
        from unnest(p_run_ids, p_org_ids, p_details) with ordinality as e (run_id, org_id, detail, i)
        where e.run_id is not null
        order by e.i;
    else  -- (a schema before 0027: the journal carries no organization)
        insert into runlane.run_events (run_id, event, detail)
        select e.run_id, p_event, e.detail
        from unnest(p_run_ids, p_details) with ordinality as e (run_id, detail, i)
        where e.run_id is not null
        order by e.i;
    end if;
end;
$$;

comment on function runlane._write_run_events(bigint[], text[], text, jsonb[]) is
'Journal rows p_event for runs p_run_ids (with their organizations and details), in array '
'order: the one writer of runlane.run_events.';

revoke all on function runlane._write_run_events(bigint[], text[], text, jsonb[]) from public;
