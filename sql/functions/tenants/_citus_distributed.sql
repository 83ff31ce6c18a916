-- _citus_distributed: whether Citus holds the table p_table names (distributed or a
-- reference table).
--
-- Guarantees:
-- * false where Citus is not installed, for a table that does not exist (a schema before
--   its migration) and for a table Citus does not hold (a plain database, or a
--   coordinator whose tables are its own).
-- * Citus's catalog is named in dynamic SQL, read only where it exists: the function,
--   and each caller, installs without Citus. Private: for callers whose statements Citus
--   cannot plan over many organizations, or that must reach every node.
create or replace function runlane._citus_distributed(p_table text)
returns boolean
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_held boolean := false;
begin
    if to_regclass('pg_catalog.pg_dist_partition') is not null and to_regclass(p_table) is not null then
        execute 'select exists (select 1 from pg_catalog.pg_dist_partition where logicalrelid = $1)'
            into v_held
            using to_regclass(p_table);
    end if;
    return v_held;
end;
$$;

comment on function runlane._citus_distributed(text) is
'Whether Citus holds the table (distributed or reference); false without Citus.';

revoke all on function runlane._citus_distributed(text) from public;
