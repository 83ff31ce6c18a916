-- _require_erasure_schema: erasure needs migration 0022, where a charge can outlive its
-- run (runlane.charges.run_id nullable).
--
-- Guarantees: returns when runlane.charges.run_id accepts null; otherwise (a schema
-- before 0022 during a staged upgrade, where the current functions already run) raises
-- 55000 with a hint, before the caller locks or deletes anything.
create or replace function runlane._require_erasure_schema()
returns void
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
begin
    if coalesce((
        select not a.attnotnull
        from pg_catalog.pg_attribute as a
        where a.attrelid = to_regclass('runlane.charges') and a.attname = 'run_id'
    ), false) then
        return;
    end if;
    raise exception 'erasure needs migration 0022 (charges kept without their run)'
        using errcode = '55000',
              hint = 'Run runlane migrate to the latest version, then erase again; nothing was erased.';
end;
$$;

comment on function runlane._require_erasure_schema() is
'55000 unless the schema has migration 0022 (charges.run_id nullable), which erasure needs.';

revoke all on function runlane._require_erasure_schema() from public;
