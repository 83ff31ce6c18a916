-- _run_org_for_write: the organization a fenced worker write on one run acts in, so that
-- every statement of the write can name it: on Citus the run's row is reached on the
-- node that holds its organization alone, and a locking read must name it to be planned.
--
-- Guarantees:
-- * The session's runlane.org_id when it names one (SET, SET LOCAL, set_config; empty:
--   none). A worker that names the organization of the run it writes sends the write to
--   that organization's node with nothing read elsewhere; a run of another organization
--   is then unknown to the write (RL008, or false from heartbeat), as an unknown one.
-- * Else, on a schema Citus distributes: the run's organization, read without a lock
--   (every node is asked once); '' for an unknown run, which no organization's id is
--   (runlane._check_id refuses a blank one): each statement naming it then finds no row
--   on one node, and the caller answers as for any unknown run.
-- * Else (plain PostgreSQL, or a coordinator whose tables are its own): NULL, no read:
--   the run's id alone finds its row, and the caller takes the organization from it.
-- * Private: called once, first, by the worker writes that take a run id and a fence.
create or replace function runlane._run_org_for_write(p_run_id bigint)
returns text
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_org text := nullif(current_setting('runlane.org_id', true), '');
begin
    -- (Citus's catalog looked for first: on plain PostgreSQL one lookup, no further call)
    if v_org is null
       and to_regclass('pg_catalog.pg_dist_partition') is not null
       and runlane._citus_distributed('runlane.runs') then
        select r.org_id into v_org
        from runlane.runs as r
        where r.run_id = p_run_id;
        v_org := coalesce(v_org, '');
    end if;
    return v_org;
end;
$$;

comment on function runlane._run_org_for_write(bigint) is
'The organization a fenced worker write on a run acts in: runlane.org_id, else on Citus the '
'run''s (read unlocked; '''' when unknown), else NULL.';

revoke all on function runlane._run_org_for_write(bigint) from public;
