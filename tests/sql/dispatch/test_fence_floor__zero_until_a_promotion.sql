-- runlane._fence_floor: 0 on a server that was never promoted (timeline 1), so fences go
-- 1, 2, 3 there; a promoted server's floor is (timeline - 1) * 2^32 (proven with a real
-- promotion in tests/runner/test_failover.py). Not callable by applications or workers.
begin;
select plan(3);

select is(runlane._fence_floor(), 0::bigint, 'timeline 1: no floor');
select ok(
    not has_function_privilege('runlane_worker', 'runlane._fence_floor()', 'execute')
    and not has_function_privilege('runlane_api', 'runlane._fence_floor()', 'execute'),
    'a private helper of claim_runs'
);
select is(
    (select p.provolatile::text from pg_proc as p where p.oid = 'runlane._fence_floor()'::regprocedure),
    'v',
    'volatile: read at each claim, never folded into a cached plan'
);

select * from finish();
rollback;
