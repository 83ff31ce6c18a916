-- lead_maintenance_with_holder: runlane.lead_maintenance, also naming the worker that
-- held the lease before the call, so a follower can tell that its holder went silent.
--
-- Guarantees:
-- * won is exactly what runlane.lead_maintenance(p_worker, p_ttl) returns (same rules,
--   arguments, errors and lock_timeout), called with the lease row locked for the call.
-- * holder is the worker that held the lease when the call began, when that was another
--   worker (null when the lease was free, or held by p_worker); holder_silent_ms the
--   milliseconds since its last renewal, holder_ttl_ms the length of its lease
--   (expires_at - renewed_at) and holder_lapsed whether the lease had expired (then a
--   call that won took it over). A healthy holder renews at least every half lease
--   (runner/runlane/maintenance.py), so silence beyond half its lease, or a lapse, says
--   it stopped renewing. Worker ids only: no other detail of the holder.
-- * Before 0005 (no lease row: the advisory leadership of old) holder is null.
create or replace function runlane.lead_maintenance_with_holder(p_worker text, p_ttl interval)
returns table (won boolean, holder text, holder_silent_ms bigint, holder_ttl_ms bigint, holder_lapsed boolean)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_now timestamptz;
    v_leader text;
    v_renewed timestamptz;
    v_expires timestamptz;
begin
    if to_regclass('runlane.leader') is not null then
        select l.leader, l.renewed_at, l.expires_at
        into v_leader, v_renewed, v_expires
        from runlane.leader as l
        where l.role = 'maintenance'
        for no key update;
    end if;
    v_now := clock_timestamp();

    won := runlane.lead_maintenance(p_worker, p_ttl);
    if v_leader is not null and v_leader is distinct from p_worker then
        holder := v_leader;
        holder_silent_ms := greatest(floor(extract(epoch from v_now - v_renewed) * 1000), 0)::bigint;
        holder_ttl_ms := floor(extract(epoch from v_expires - v_renewed) * 1000)::bigint;
        holder_lapsed := v_expires < v_now;
    end if;
    return next;
end;
$$;

comment on function runlane.lead_maintenance_with_holder(text, interval) is
'lead_maintenance(p_worker, p_ttl) as won, plus the other worker that held the lease before the call: '
'its id, milliseconds since its last renewal, its lease length and whether the lease had lapsed.';

revoke all on function runlane.lead_maintenance_with_holder(text, interval) from public;
grant execute on function runlane.lead_maintenance_with_holder(text, interval) to runlane_worker;
