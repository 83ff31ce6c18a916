-- _claim_org_caps: the runs claim_runs locked that their organizations' caps and their
-- computers admit, counted under the organizations' claim locks.
--
-- Guarantees:
-- * Locks the rows of p_orgs (the organizations of the locked background runs) in
--   runlane.org_claim_locks, in org_id order (no deadlocks), adding a missing row first;
--   never SKIP LOCKED. Only claim_runs locks these rows: claimers of one organization wait
--   for each other, briefly, never for an API transaction. On a schema without the table
--   the organizations' platform_settings rows are locked instead.
-- * Then, in a new snapshot that sees every claim committed while it waited, returns
--   p_locked in order without the background runs beyond their organization's
--   agent_max_concurrency less its running background runs, and without every run but
--   the first of each computer: an organization never has more running background runs
--   than its cap, however many workers claim at once.
create or replace function runlane._claim_org_caps(p_locked bigint[], p_orgs text[])
returns bigint[]
language plpgsql
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan
as $$
declare
    v_lock_rows int;
    v_accepted bigint[];
begin
    -- STEP: the organizations' claim locks.
    if cardinality(p_orgs) > 0 then
        if to_regclass('runlane.org_claim_locks') is null then
            -- (a schema before 0019: the organization's settings row)
            perform 1
            from runlane.platform_settings as s
            where s.org_id = any(p_orgs)
            order by s.org_id
            for no key update;
        else
            perform 1
            from runlane.org_claim_locks as l
            where l.org_id = any(p_orgs)
            order by l.org_id
            for update;
            get diagnostics v_lock_rows = row_count;
            if v_lock_rows < (select count(distinct o.org_id) from unnest(p_orgs) as o (org_id)) then
                insert into runlane.org_claim_locks as l (org_id)
                select distinct o.org_id
                from unnest(p_orgs) as o (org_id)
                order by o.org_id
                on conflict (org_id) do nothing;
                perform 1
                from runlane.org_claim_locks as l
                where l.org_id = any(p_orgs)
                order by l.org_id
                for update;
            end if;
        end if;
    end if;

    -- STEP: the exact count, a new statement and so a new snapshot.
    select coalesce(array_agg(k.run_id order by k.position), '{}')
    into v_accepted
    from (
        select
            r.run_id,
            r.org_id,
            r.lane,
            r.computer_id,
            l.position,
            row_number() over (partition by r.org_id, r.lane order by l.position) as org_rank,
            row_number() over (partition by r.computer_id order by l.position) as computer_rank
        from unnest(p_locked) with ordinality as l (run_id, position)
        join runlane.runs as r on r.run_id = l.run_id
    ) as k
    join runlane.platform_settings as s on s.org_id = k.org_id
    left join lateral (
        select count(*) as running
        from runlane.runs as busy
        where busy.org_id = k.org_id and busy.lane = 'background' and busy.state = 'running'
    ) as b on k.lane = 'background'
    where (k.lane <> 'background' or k.org_rank <= s.agent_max_concurrency - b.running)
      and (k.computer_id is null or k.computer_rank = 1);
    return v_accepted;
end;
$$;

comment on function runlane._claim_org_caps(bigint[], text[]) is
'claim_runs'' exact cap: locks the organizations'' claim rows, then returns the locked runs '
'their caps and computers admit.';

revoke all on function runlane._claim_org_caps(bigint[], text[]) from public;
