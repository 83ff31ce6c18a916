-- _local_shards: the shards of a table Citus holds that this server stores, by name, for
-- the reads of a claim that serves this server's organizations.
--
-- Guarantees:
-- * The schema-qualified, quoted names of p_table's shards placed on this server (its
--   Citus group), in shard order: for a distributed table, the shards of the
--   organizations this server holds; for a reference table, its one local copy.
-- * Empty where Citus is not installed, for a table Citus does not hold, and on a server
--   that stores none of its shards (a coordinator without shards).
-- * Read from Citus's catalog at each call: a shard moved since the last call is read
--   where it is now. Citus's catalog is named in dynamic SQL: the function installs
--   without Citus. Private.
create or replace function runlane._local_shards(p_table text)
returns text[]
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_shards text[] := '{}'::text[];
begin
    if to_regclass('pg_catalog.pg_dist_local_group') is not null and to_regclass(p_table) is not null then
        execute $sql$
            select coalesce(array_agg(
                format('%I.%I', n.nspname, c.relname || '_' || s.shardid) order by s.shardid
            ), '{}')
            from pg_catalog.pg_dist_shard as s
            inner join pg_catalog.pg_dist_placement as p on p.shardid = s.shardid
            inner join pg_catalog.pg_class as c on c.oid = s.logicalrelid
            inner join pg_catalog.pg_namespace as n on n.oid = c.relnamespace
            where s.logicalrelid = $1
              and p.groupid = (select g.groupid from pg_catalog.pg_dist_local_group as g)
              and p.shardstate = 1
        $sql$
        into v_shards
        using to_regclass(p_table);
    end if;
    return v_shards;
end;
$$;

comment on function runlane._local_shards(text) is
'The names of the table''s Citus shards stored on this server; empty without Citus or shards.';

revoke all on function runlane._local_shards(text) from public;
