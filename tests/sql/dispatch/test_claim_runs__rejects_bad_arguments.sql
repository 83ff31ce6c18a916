-- Bad arguments are refused with a clear error and change nothing.
begin;
select plan(6);

select throws_ok(
    $$select runlane.claim_runs(null, array['background'])$$, '22004', null,
    'a claim without a worker name is refused'
);
select throws_ok(
    $$select runlane.claim_runs('w', array['everything'])$$, '22023', null,
    'an unknown lane is refused'
);
select throws_ok(
    $$select runlane.claim_runs('w', array[]::text[])$$, '22023', null,
    'an empty lane list is refused'
);
select throws_ok(
    $$select runlane.claim_runs('w', array['background'], 0)$$, '22023', null,
    'a limit below 1 is refused'
);
select throws_ok(
    $$select runlane.claim_runs('w', array['background'], 100000)$$, '22023', null,
    'a huge limit is refused'
);
select throws_ok(
    $$select runlane.claim_runs('w', array['background'], 10, interval '-1 second')$$, '22023', null,
    'a negative lease is refused'
);

select * from finish();
rollback;
