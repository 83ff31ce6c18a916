-- purge_finished deletes from runlane.runs and runlane.messages: each deleted row makes
-- PostgreSQL check every foreign key that references it, with a scan of the referencing
-- table unless an index leads with the key's first column, the id (every key names
-- (id, org_id) since 0029: the id alone finds the few rows, org_id is checked on them).
-- Those checks must be index lookups, or the purge rate falls as the tables grow.
-- A unique index whose columns all lie within the key serves too (the lookup finds at
-- most one row): runs (run_id, source_message_id) -> messages is checked on runs_pkey.
-- The list below names the keys that have no such index, each for a reason:
--   computer_leases.run_id: at most one row per computer, a scan is cheap;
-- (runs.source_message_id got its index in migration 0011: bench/claim_after_purge.py
-- measured 7 runs/s with 1,000,000 runs without it and 5,653 runs/s with it. Since 0016
-- the key is the pair (run_id, source_message_id), which runs_pkey serves.)
begin;
select plan(1);

select set_eq(
    $$
        select format('%s.%s', c.conrelid::regclass::text, a.attname)
        from pg_catalog.pg_constraint as c
        inner join pg_catalog.pg_attribute as a
            on a.attrelid = c.conrelid and a.attnum = c.conkey[1]
        where
            c.contype = 'f'
            and c.connamespace = 'runlane'::regnamespace
            and c.confrelid in ('runlane.runs'::regclass, 'runlane.messages'::regclass)
            and not exists (
                select 1
                from pg_catalog.pg_index as i
                where
                    i.indrelid = c.conrelid
                    and (
                        (i.indkey::int2 [])[0] = c.conkey[1]
                        or (i.indisunique and i.indpred is null and (i.indkey::int2 []) <@ c.conkey)
                    )
            )
    $$,
    array['runlane.computer_leases.run_id'],
    'every foreign key to runs or messages is indexed, but for the keys listed with a reason'
);

select * from finish();
rollback;
