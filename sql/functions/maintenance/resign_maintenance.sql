-- resign_maintenance: a leader that stops (SIGTERM, the end of `runlane tick`) hands the
-- maintenance lease back, so a follower takes over at its next attempt instead of
-- waiting for the lease to lapse.
--
-- Guarantees: deletes the lease only when p_worker holds it (returns true); otherwise
-- changes nothing and returns false (before 0005: releases this session's advisory
-- leadership lock, see lead_maintenance). NULL p_worker gives 22004. Waits at most
-- lock_timeout (5 s) for a concurrent lead_maintenance, then 55P03.
create or replace function runlane.resign_maintenance(p_worker text)
returns boolean
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
begin
    if p_worker is null then
        raise exception 'resign_maintenance needs the worker id that holds the lease'
            using errcode = '22004';
    end if;
    if to_regclass('runlane.leader') is null then  -- before 0005: the leadership of old
        perform pg_advisory_unlock_all();  -- the caller's leadership session lock (stacked)
        return true;
    end if;
    delete from runlane.leader as l
    where l.role = 'maintenance' and l.leader = resign_maintenance.p_worker;
    return found;
end;
$$;

comment on function runlane.resign_maintenance(text) is
'Gives the maintenance lease back when p_worker holds it (true); otherwise false.';

revoke all on function runlane.resign_maintenance(text) from public;
grant execute on function runlane.resign_maintenance(text) to runlane_worker;
