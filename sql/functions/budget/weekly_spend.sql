-- weekly_spend: what an owner was charged in the week containing p_now.
--
-- Guarantees: the sum of the owner's charges (runlane.charges, stamped with the owner
-- when charged) made in the week [Monday 00:00, next Monday 00:00) of the owner's zone
-- (users.timezone, else the organization's), with the wall-clock rules of
-- runlane._wall_to_instant: whatever week the run was created in and whatever became of
-- it (succeeded, failed, retried, reaped, canceled). 0 when nothing was charged. Raises
-- 22004 for a null argument and 22023 for an unknown owner, and for another
-- organization's owner when the login is scoped to one (the same message).
-- Flat in history: whole UTC quarter hours of the week are read from
-- runlane.charge_buckets (at most 676 rows, a 169-hour week), and only a week boundary
-- that is not on a quarter hour reads the ledger rows of its partial quarter.
create or replace function runlane.weekly_spend(p_owner_id text, p_now timestamptz default now())
returns numeric
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_org text;  -- the owner's, named in every statement (on Citus, one node)
    v_tz text;
    v_monday timestamp;
    v_start timestamptz;
    v_end timestamptz;
    v_first timestamptz;
    v_last timestamptz;
    v_total numeric;
begin
    if p_owner_id is null or p_now is null then
        raise exception 'weekly_spend needs an owner and an instant'
            using errcode = '22004';
    end if;
    perform runlane._check_instant('now', p_now);
    -- (held to one organization: only there, so a foreign id costs an unknown one's; else
    -- the user ids' namespace, from 0029)
    v_org := v_scope;
    if v_org is null and to_regclass('runlane.user_orgs') is not null then
        select o.org_id into v_org from runlane.user_orgs as o where o.user_id = p_owner_id;
    end if;
    if v_org is null then
        select u.org_id into v_org from runlane.users as u where u.user_id = p_owner_id;
    end if;
    select coalesce(u.timezone, s.timezone, 'UTC') into v_tz
    from runlane.users as u
    left join runlane.platform_settings as s on s.org_id = u.org_id
    where u.user_id = p_owner_id
      and u.org_id = v_org;
    if not found then
        raise exception 'unknown owner %', runlane._quote_for_error(p_owner_id)
            using errcode = '22023';
    end if;

    v_monday := date_trunc('week', p_now at time zone v_tz);
    v_start := runlane._wall_to_instant(v_monday, v_tz);
    v_end := runlane._wall_to_instant(v_monday + interval '7 days', v_tz);
    -- The whole quarter hours inside [v_start, v_end): [v_first, v_last).
    v_first := date_bin('15 minutes', v_start, timestamptz '2000-01-01 00:00:00+00');
    if v_first < v_start then
        v_first := v_first + interval '15 minutes';
    end if;
    v_last := date_bin('15 minutes', v_end, timestamptz '2000-01-01 00:00:00+00');

    if runlane._rows_name_their_org() then
        select coalesce(sum(b.amount), 0) into v_total
        from runlane.charge_buckets as b
        where b.owner_id = weekly_spend.p_owner_id
          and b.org_id = v_org
          and b.bucket_start >= v_first
          and b.bucket_start < v_last;
    else  -- (before 0027: buckets name no organization)
        select coalesce(sum(b.amount), 0) into v_total
        from runlane.charge_buckets as b
        where b.owner_id = weekly_spend.p_owner_id
          and b.bucket_start >= v_first
          and b.bucket_start < v_last;
    end if;

    -- GUARD: only a boundary off the quarter-hour grid has a partial quarter to read.
    if v_first > v_start or v_last < v_end then
        select v_total + coalesce(sum(c.amount), 0) into v_total
        from runlane.charges as c
        where c.owner_id = weekly_spend.p_owner_id
          and c.org_id = v_org
          and (
              (c.charged_at >= v_start and c.charged_at < v_first)
              or (c.charged_at >= v_last and c.charged_at < v_end)
          );
    end if;
    return v_total;
end;
$$;

comment on function runlane.weekly_spend(text, timestamptz) is
'What an owner was charged in the week (Monday 00:00 in the owner''s zone) containing p_now, '
'whatever became of the runs.';

revoke all on function runlane.weekly_spend(text, timestamptz) from public;
grant execute on function runlane.weekly_spend(text, timestamptz) to runlane_api, runlane_worker;
