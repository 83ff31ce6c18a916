-- _run_orgs: the organizations of runs given by id, on a schema Citus distributes, so
-- that a call on many runs can name each run's organization in its statements.
--
-- Guarantees:
-- * One row (run_id, org_id) per distinct known run of p_run_ids; an unknown id (or
--   null) has none. Reads without locks.
-- * This server's shards are read first (runlane._local_shards): a worker asks for the
--   runs it claimed on its node, found there with no command sent elsewhere. Only the
--   ids not found there are sought on every node.
-- * Private: for callers that branch on Citus; on plain PostgreSQL it reads the table.
create or replace function runlane._run_orgs(p_run_ids bigint[])
returns table (run_id bigint, org_id text)
language plpgsql
stable
set search_path = pg_catalog, pg_temp
set jit = off  -- (a read of every local shard: compiling it costs more than it saves)
as $$
#variable_conflict use_column
declare
    v_shards text[] := runlane._local_shards('runlane.runs');
    v_ids bigint[] := '{}'::bigint[];
    v_orgs text[] := '{}'::text[];
    v_rest bigint[];
begin
    if cardinality(v_shards) > 0 then
        execute (
            select 'select coalesce(array_agg(q.run_id), ''{}''), coalesce(array_agg(q.org_id), ''{}'') from ('
                || string_agg(format('select r.run_id, r.org_id from %s as r where r.run_id = any($1)', s.shard),
                              ' union all ')
                || ') as q'
            from unnest(v_shards) as s (shard)
        )
        into v_ids, v_orgs
        using p_run_ids;
    end if;
    v_rest := array(
        select distinct u.run_id from unnest(p_run_ids) as u (run_id)
        where u.run_id is not null and u.run_id <> all(v_ids)
    );
    return query
    select f.run_id, f.org_id from unnest(v_ids, v_orgs) as f (run_id, org_id);
    if cardinality(v_rest) > 0 then
        return query
        select r.run_id, r.org_id from runlane.runs as r where r.run_id = any(v_rest);
    end if;
end;
$$;

comment on function runlane._run_orgs(bigint[]) is
'The organization of each known run given by id: this server''s shards first, then every node.';

revoke all on function runlane._run_orgs(bigint[]) from public;
