-- _claim_computer_leases: takes the computer leases of the computer-bound runs claim_runs
-- is about to claim.
--
-- Guarantees: for each run of p_accepted bound to a computer, in computer_id order (no
-- deadlocks), the computer's lease in runlane.computer_leases is taken for the run, under
-- the fence its claim gives it (greatest(fence + 1, p_fence_floor)), until now() +
-- p_lease, unless the lease is live for another run: that run is then not claimed (it
-- stays queued, untouched). The lease row names the run's organization (from 0027).
-- Returns the runs whose lease was taken.
create or replace function runlane._claim_computer_leases(
    p_accepted bigint[],
    p_fence_floor bigint,
    p_lease interval
)
returns bigint[]
language plpgsql
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan
as $$
declare
    v_taken bigint[];
begin
    if runlane._rows_name_their_org() then
        with wanted as (
            select r.computer_id, r.run_id, r.org_id, greatest(r.fence + 1, p_fence_floor) as fence
            from runlane.runs as r
            where r.run_id = any(p_accepted) and r.computer_id is not null
            order by r.computer_id
        ),
        taken as (
            insert into runlane.computer_leases as cl (computer_id, run_id, fence, expires_at, org_id)
            select w.computer_id, w.run_id, w.fence, now() + p_lease, w.org_id
            from wanted as w
            order by w.computer_id
            on conflict (computer_id) do update
            set run_id = excluded.run_id, fence = excluded.fence, expires_at = excluded.expires_at,
                org_id = excluded.org_id
            where cl.expires_at <= now() or cl.run_id = excluded.run_id
            returning cl.run_id
        )
        select coalesce(array_agg(t.run_id), '{}') into v_taken from taken as t;
    else  -- (a schema before 0027: leases name no organization)
        with wanted as (
            select r.computer_id, r.run_id, greatest(r.fence + 1, p_fence_floor) as fence
            from runlane.runs as r
            where r.run_id = any(p_accepted) and r.computer_id is not null
            order by r.computer_id
        ),
        taken as (
            insert into runlane.computer_leases as cl (computer_id, run_id, fence, expires_at)
            select w.computer_id, w.run_id, w.fence, now() + p_lease
            from wanted as w
            order by w.computer_id
            on conflict (computer_id) do update
            set run_id = excluded.run_id, fence = excluded.fence, expires_at = excluded.expires_at
            where cl.expires_at <= now() or cl.run_id = excluded.run_id
            returning cl.run_id
        )
        select coalesce(array_agg(t.run_id), '{}') into v_taken from taken as t;
    end if;
    return v_taken;
end;
$$;

comment on function runlane._claim_computer_leases(bigint[], bigint, interval) is
'claim_runs'' computer ownership: takes the computer leases of the accepted computer-bound runs, '
'a lease live for another run left alone; returns the runs whose lease was taken.';

revoke all on function runlane._claim_computer_leases(bigint[], bigint, interval) from public;
