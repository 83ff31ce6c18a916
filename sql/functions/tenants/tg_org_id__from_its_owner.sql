-- tg_org_id__from_its_owner: a row written without its organization gets it from the run,
-- agent or user it belongs to.
--
-- Every runlane function names org_id in each row it writes into runlane.threads,
-- run_outputs, run_events, idempotency_keys, charge_buckets and computer_leases. Two
-- writers do not: a session still running the functions of a schema before 0027 (a
-- rolling upgrade's older processes) and a statement written by hand. Their rows would
-- break the NOT NULL and the foreign keys of 0029; this trigger gives them their
-- organization instead.
--
-- Guarantees: BEFORE INSERT, only for a row whose org_id is null (the trigger's WHEN: the
-- functions' own rows never call it), org_id becomes the organization of the row's run
-- (run_outputs, run_events, computer_leases), agent (threads, idempotency_keys) or owner
-- (charge_buckets); a row whose owner does not exist keeps null and is refused by the NOT
-- NULL, as before. The triggers exist from 0029 on (0029 creates them on an upgrade; this
-- file on a new database). `runlane migrate --citus` drops them: on Citus every row must
-- arrive with its organization to reach its node.
create or replace function runlane.tg_org_id__from_its_owner()
returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_row jsonb := to_jsonb(new);  -- (one function for six tables: fields by name)
begin
    if tg_table_name in ('run_outputs', 'run_events', 'computer_leases') then
        select r.org_id into new.org_id
        from runlane.runs as r
        where r.run_id = (v_row ->> 'run_id')::bigint;
    elsif tg_table_name in ('threads', 'idempotency_keys') then
        select a.org_id into new.org_id
        from runlane.agents as a
        where a.agent_id = v_row ->> 'agent_id';
    elsif tg_table_name = 'charge_buckets' then
        select u.org_id into new.org_id
        from runlane.users as u
        where u.user_id = v_row ->> 'owner_id';
    end if;
    return new;
end;
$$;

comment on function runlane.tg_org_id__from_its_owner() is
'Gives a row written without org_id (by earlier functions during an upgrade, or by hand) the '
'organization of its run, agent or owner.';

revoke all on function runlane.tg_org_id__from_its_owner() from public;

do $triggers$
declare
    v_table text;
    v_on_citus text[] := '{}';
begin
    -- (not on a table Citus holds: there every row must name its organization to reach
    -- its node; the catalog exists only where Citus is installed)
    if to_regclass('pg_catalog.pg_dist_partition') is not null then
        execute 'select coalesce(array_agg(c.relname::text), ''{}'') from pg_catalog.pg_dist_partition as p '
            'join pg_catalog.pg_class as c on c.oid = p.logicalrelid '
            'where c.relnamespace = ''runlane''::regnamespace'
        into v_on_citus;
    end if;
    -- (from 0029 on; before it org_id may be null, and the migrations fill it)
    if to_regclass('runlane.agent_orgs') is not null then
        foreach v_table in array array[
            'threads', 'run_outputs', 'run_events', 'idempotency_keys', 'charge_buckets', 'computer_leases'
        ] loop
            continue when v_table = any(v_on_citus);
            execute format(
                'create or replace trigger %I before insert on runlane.%I for each row '
                'when (new.org_id is null) execute function runlane.tg_org_id__from_its_owner()',
                v_table || '_org_id', v_table
            );
        end loop;
    end if;
end
$triggers$;
