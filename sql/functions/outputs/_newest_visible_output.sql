-- _newest_visible_output: the id of a run's newest output of a kind outputs_since pages
-- (text, final, message_tool, card); null when it has none.
--
-- Guarantees: one descent of the run's outputs, by the whole key (run_id, org_id) from
-- 0027 on, so on Citus it reads the one node that holds the organization; by run id on a
-- schema before 0027, whose outputs name no organization. Private: run_status reads it
-- in its snapshot.
create or replace function runlane._newest_visible_output(p_run_id bigint, p_org_id text)
returns bigint
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_output_id bigint;
begin
    if runlane._rows_name_their_org() then
        select max(o.output_id) into v_output_id
        from runlane.run_outputs as o
        where o.run_id = p_run_id
          and o.org_id = p_org_id
          and o.kind in ('text', 'final', 'message_tool', 'card');
    else  -- (a schema before 0027: outputs name no organization)
        select max(o.output_id) into v_output_id
        from runlane.run_outputs as o
        where o.run_id = p_run_id
          and o.kind in ('text', 'final', 'message_tool', 'card');
    end if;
    return v_output_id;
end;
$$;

comment on function runlane._newest_visible_output(bigint, text) is
'A run''s newest output id of a kind outputs_since pages, NULL when none.';

revoke all on function runlane._newest_visible_output(bigint, text) from public;
