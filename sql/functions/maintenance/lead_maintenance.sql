-- lead_maintenance: win, keep or lose the maintenance leadership, a lease in runlane.leader.
--
-- Guarantees:
-- * Returns true, and the lease is p_worker's until now + p_ttl, when the lease was free,
--   had lapsed (expires_at < now), or already belonged to p_worker (renewal; a holder
--   whose lease lapsed but that nobody took keeps it). Returns false, changing nothing,
--   while another worker's lease runs: leadership is renewed only by its holder.
-- * At most one holder at any instant: the lease row is written with one
--   insert … on conflict do update … where (the row lock orders concurrent callers).
-- * A leader that is paused (SIGSTOP, a stalled VM) stops renewing and loses the lease
--   p_ttl after its last renewal; a follower calling this every leader_retry seconds then
--   wins it. No session or advisory lock is involved, and the row can be written only
--   through this function and resign_maintenance.
-- * Waits at most lock_timeout (5 s) for a concurrent caller, then 55P03.
-- * On a schema without 0005 (a rolling upgrade's expand stage, where HEAD functions
--   already run) it falls back to the leadership of old: the session advisory lock
--   7317002 of the caller's connection (true while that session holds it), until 0005.
-- * Arguments: p_worker non-blank, at most 256 characters; p_ttl between 1 second and
--   60 seconds. NULL gives 22004, anything else out of range 22023. A longer lease is
--   refused, not shortened: whoever holds it and stops renewing stops reaping, ticks and
--   purges for that long, silently, so a caller asking for more is told at once instead
--   of holding a lease it did not ask for. 60 s is the workers' own run lease (claim_runs'
--   default) and four times the runner's default leader lease (three 5 s ticks): a few
--   maintenance passes, never an hour.
create or replace function runlane.lead_maintenance(p_worker text, p_ttl interval)
returns boolean
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_now timestamptz := clock_timestamp();
    v_won boolean;
begin
    if p_worker is null or p_ttl is null then
        raise exception 'lead_maintenance needs a worker id and a lease ttl'
            using errcode = '22004', hint = 'Pass p_worker (this worker''s id) and p_ttl (e.g. 15 seconds).';
    end if;
    if p_worker ~ '^[\s\u3000]*$' or length(p_worker) > 256 then
        raise exception 'a leader''s worker id must be non-blank and at most 256 characters'
            using errcode = '22023', hint = 'Use the worker id the worker logs as worker.id.';
    end if;
    if p_ttl < interval '1 second' or p_ttl > interval '60 seconds' then
        raise exception 'a leader lease ttl must be between 1 second and 60 seconds, got %', p_ttl
            using errcode = '22023',
                  hint = 'Keep it a few ticks long, above the tick interval: the leader renews it every pass.';
    end if;

    if to_regclass('runlane.leader') is null then  -- before 0005: the leadership of old
        return pg_try_advisory_lock(7317002);
    end if;

    insert into runlane.leader as l (role, leader, acquired_at, renewed_at, expires_at)
    values ('maintenance', p_worker, v_now, v_now, v_now + p_ttl)
    on conflict (role) do update
    set leader = excluded.leader,
        acquired_at = case when l.leader = excluded.leader then l.acquired_at else excluded.acquired_at end,
        renewed_at = excluded.renewed_at,
        expires_at = excluded.expires_at
    where l.leader = excluded.leader or l.expires_at < excluded.renewed_at
    returning true into v_won;

    return coalesce(v_won, false);
end;
$$;

comment on function runlane.lead_maintenance(text, interval) is
'Wins or renews the maintenance leader lease for p_ttl (true) unless another worker''s lease runs (false).';

revoke all on function runlane.lead_maintenance(text, interval) from public;
grant execute on function runlane.lead_maintenance(text, interval) to runlane_worker;
