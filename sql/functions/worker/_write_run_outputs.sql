-- _write_run_outputs: the one writer of runlane.run_outputs.
--
-- Guarantees: one output per element of p_run_ids, in array order (output ids ascend in
-- that order): the run, its attempt, kind and body, and from migration 0027 on the run's
-- organization (p_org_ids, which the caller read from the run's row). Returns each
-- output's run, id, kind and the time it was written, in the same order. The caller has
-- checked the kinds, bodies and the run's fence: this writes what it is given. On a
-- schema Citus distributes, one statement per output (each names its organization).
create or replace function runlane._write_run_outputs(
    p_run_ids bigint[],
    p_org_ids text[],
    p_attempts integer[],
    p_kinds text[],
    p_bodies text[]
)
returns table (run_id bigint, output_id bigint, kind text, written_at timestamptz)
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    -- (Citus's catalog first: on plain PostgreSQL the hot path calls no function for it)
    if to_regclass('pg_catalog.pg_dist_partition') is not null
       and runlane._citus_distributed('runlane.run_outputs') then
        -- (row by row: each INSERT … VALUES goes to its one shard, where Citus would run
        -- an INSERT … SELECT over the arrays through intermediate results, ~13 ms a call)
        for v_i in 1 .. coalesce(cardinality(p_run_ids), 0) loop
            insert into runlane.run_outputs as o (run_id, org_id, attempt, kind, body)
            values (p_run_ids[v_i], p_org_ids[v_i], p_attempts[v_i], p_kinds[v_i], p_bodies[v_i])
            returning o.output_id into output_id;
            run_id := p_run_ids[v_i];
            kind := p_kinds[v_i];
            written_at := clock_timestamp();
            return next;
        end loop;
        return;
    end if;
    if runlane._rows_name_their_org() then
        return query
        insert into runlane.run_outputs as o (run_id, org_id, attempt, kind, body)
        select w.run_id, w.org_id, w.attempt, w.kind, w.body
        from unnest(p_run_ids, p_org_ids, p_attempts, p_kinds, p_bodies) with ordinality
            as w (run_id, org_id, attempt, kind, body, i)
        order by w.i
        returning o.run_id, o.output_id, o.kind, clock_timestamp();
    else  -- (a schema before 0027: outputs carry no organization)
        return query
        insert into runlane.run_outputs as o (run_id, attempt, kind, body)
        select w.run_id, w.attempt, w.kind, w.body
        from unnest(p_run_ids, p_attempts, p_kinds, p_bodies) with ordinality
            as w (run_id, attempt, kind, body, i)
        order by w.i
        returning o.run_id, o.output_id, o.kind, clock_timestamp();
    end if;
end;
$$;

comment on function runlane._write_run_outputs(bigint[], text[], integer[], text[], text[]) is
'Writes outputs (run, organization, attempt, kind, body) in array order and returns their ids '
'and times: the one writer of runlane.run_outputs.';

revoke all on function runlane._write_run_outputs(bigint[], text[], integer[], text[], text[]) from public;
