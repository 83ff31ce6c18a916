-- The worker's claim (keyed, reporting skips) checks its arguments with one test on the
-- usual path: a null anywhere in them still reaches the checks that name it, with or
-- without a claim key, and nothing is claimed or recorded.
begin;
select plan(8);

do $$
begin
    perform runlane_test.agent('agent-n', 'org-n');
    perform runlane_test.queued_run('agent-n', 'interactive', 'interactive');
end
$$;

select throws_ok(
    $$select * from runlane.claim_runs('w', null, 10, interval '60 seconds', null, true)$$,
    '22023', null,
    'null lanes: 22023'
);
select throws_ok(
    $$select * from runlane.claim_runs('w', array['interactive'], null, interval '60 seconds',
        '00000000-0000-0000-0000-000000000001', true)$$,
    '22023', null,
    'a null limit with a key: 22023'
);
select throws_ok(
    $$select * from runlane.claim_runs('w', array['interactive'], 10, null, null, true)$$,
    '22023', null,
    'a null lease: 22023'
);
select throws_ok(
    $$select * from runlane.claim_runs(null, array['interactive'], 10, interval '60 seconds',
        '00000000-0000-0000-0000-000000000002', true)$$,
    '22004', null,
    'a null worker with a key: 22004'
);
select throws_ok(
    $$select * from runlane.claim_runs('w', array['interactive'], 10, interval '60 seconds',
        null, null)$$,
    '22004', null,
    'a null p_report_skipped: 22004'
);
select throws_ok(
    $$select * from runlane.claim_runs(' ', array['interactive'], 10, interval '60 seconds',
        null, true)$$,
    '22023', null,
    'a blank worker id: 22023'
);
select is(
    (select count(*) from runlane.runs where state <> 'queued'),
    0::bigint,
    'nothing was claimed'
);
select is(
    (select count(*) from runlane.claim_receipts),
    0::bigint,
    'nothing was recorded'
);

select * from finish();
rollback;
