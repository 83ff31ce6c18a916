-- _fence_floor: the least fence a claim on this server may hand out.
--
-- Guarantees: (timeline - 1) * 2^32, the timeline read from the WAL this server writes now
-- (0 on a server that was never promoted). A standby promoted when its primary failed
-- writes a new, higher timeline, so every fence it hands out is above every fence the old
-- primary handed out, those of the claims an asynchronous standby never received
-- included: without the floor the promoted server hands such a lost claim's fence (its
-- run's fence + 1) out again, and two attempts hold one fence. A run is claimed fewer than
-- 2^32 times on one timeline; fences stay exact in a JavaScript number up to timeline
-- 2^21.
-- PL/pgSQL, not SQL: a SQL function with a SET clause is parsed and planned again on every
-- call (about 40 us of each claim); this expression is prepared once per session.
create or replace function runlane._fence_floor()
returns bigint
language plpgsql
volatile
set search_path = pg_catalog, pg_temp
as $$
begin
    -- a WAL file's name starts with its timeline, 8 hex digits
    return (
        ('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::bigint - 1
    ) << 32;
end;
$$;

comment on function runlane._fence_floor() is
'The least fence a claim may hand out: (timeline - 1) * 2^32, above every fence of an earlier primary.';

revoke all on function runlane._fence_floor() from public;
