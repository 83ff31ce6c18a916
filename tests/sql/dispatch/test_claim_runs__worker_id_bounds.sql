-- claim_runs and register_worker: a worker id is 1..256 characters, not only whitespace;
-- a 10 MB or blank (tabs, U+3000) id is refused with 22023, not 54000 from an index.
begin;
select plan(8);

select throws_ok(
    $$select * from runlane.claim_runs(repeat('w', 10485760), array['interactive'])$$,
    '22023', null, 'claim_runs refuses a 10 MB worker id'
);
select throws_ok(
    $$select * from runlane.claim_runs(E'\t', array['interactive'])$$,
    '22023', null, 'claim_runs refuses a worker id of a tab'
);
select throws_ok(
    $$select * from runlane.claim_runs(U&'\3000', array['interactive'])$$,
    '22023', null, 'claim_runs refuses a worker id of U+3000'
);
select throws_ok(
    $$select * from runlane.claim_runs('   ', array['interactive'])$$,
    '22023', null, 'claim_runs refuses a worker id of ASCII spaces as blank (22023, not 22004: it is not null)'
);
select throws_like(
    $$select * from runlane.claim_runs('w', array['interactive', repeat('x', 10485760)])$$,
    'claim_runs lanes must be interactive and/or background, got ''{interactive,x%…'' (10485774 characters)',
    'claim_runs quotes at most the start of a bad lane array, never the 10 MB whole'
);
select throws_ok(
    $$select runlane.register_worker(repeat('w', 10485760), array['interactive'])$$,
    '22023', null, 'register_worker refuses a 10 MB worker id'
);
select throws_ok(
    $$select runlane.register_worker(U&'\3000', array['interactive'])$$,
    '22023', null, 'register_worker refuses a worker id of U+3000'
);
select lives_ok(
    $$select * from runlane.claim_runs('worker-1', array['interactive'])$$,
    'a plain worker id works'
);

select * from finish();
rollback;
