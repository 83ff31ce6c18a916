-- _rows_name_their_org: whether the rows reached through a run, an agent or a user carry
-- their organization too (runlane.threads, run_outputs, run_events, idempotency_keys,
-- charge_buckets and computer_leases have org_id: migration 0027 adds all six at once).
--
-- Guarantees: true on every schema from 0027 on, false before; the writers of those
-- tables fill org_id exactly where it is true, so the functions run on every schema from
-- the expand step (0002) on.
create or replace function runlane._rows_name_their_org()
returns boolean
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
begin
    -- (PL/pgSQL, not SQL: a SQL function that cannot be inlined, as one with a pinned
    -- search_path, is planned again in every transaction; this plan is the session's)
    return exists (
        select
        from pg_catalog.pg_attribute as a
        where
            a.attrelid = 'runlane.run_events'::regclass
            and a.attname = 'org_id'
            and not a.attisdropped
    );
end;
$$;

comment on function runlane._rows_name_their_org() is
'Whether threads, run_outputs, run_events, idempotency_keys, charge_buckets and '
'computer_leases carry org_id (migration 0027).';

revoke all on function runlane._rows_name_their_org() from public;
