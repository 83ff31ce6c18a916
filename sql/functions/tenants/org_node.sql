-- org_node: the server that holds an organization's rows, where its calls run in one hop.
--
-- Guarantees:
-- * On a Citus cluster distributed by runlane migrate --citus: one row, the host and port
--   of the active primary worker node that holds the organization's shard (every table of
--   an organization is on that node). A call of that organization sent there runs every
--   statement on that node, without the coordinator; sent anywhere else it is answered
--   the same, in more hops. The answer is a function of the id alone (the shard its hash
--   falls in), for a known id or not, so it tells nobody whether the organization exists.
-- * No row on plain PostgreSQL, or where the schema is not distributed: the server the
--   caller is connected to holds everything.
-- * 22004 for a null id. Never writes. Citus's catalogs are named in dynamic SQL, so the
--   function installs without Citus.
create or replace function runlane.org_node(p_org_id text)
returns table (host text, port int)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
begin
    perform runlane._api_org();  -- (an API login acts only where it is entered)
    if p_org_id is null then
        raise exception 'organization id is required'
            using errcode = '22004';
    end if;
    if to_regclass('pg_catalog.pg_dist_partition') is null then
        return;
    end if;
    return query execute $sql$
        select n.nodename::text, n.nodeport
        from pg_catalog.pg_dist_partition as p
        inner join pg_catalog.pg_dist_placement as pl
            on pl.shardid = pg_catalog.get_shard_id_for_distribution_column(p.logicalrelid, $1)
        inner join pg_catalog.pg_dist_node as n on n.groupid = pl.groupid
        where p.logicalrelid = 'runlane.platform_settings'::regclass
          and p.partmethod = 'h'
          and n.noderole = 'primary'
          and n.isactive
    $sql$ using p_org_id;
end;
$$;

comment on function runlane.org_node(text) is
'The host and port of the Citus node that holds an organization (its calls run there in one hop); '
'no row on plain PostgreSQL.';

revoke all on function runlane.org_node(text) from public;
grant execute on function runlane.org_node(text) to runlane_api, runlane_worker;
