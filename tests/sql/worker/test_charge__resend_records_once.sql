-- A charge resent with the write sequence number
-- it was applied under (its reply was lost) records nothing more and answers the run's
-- total; the next number is a new charge; the contract form never deduplicates.
begin;
select plan(6);

do $$
begin
    perform runlane_test.agent('agent-charge-seq', 'org-charge-seq');
    perform runlane_test.queued_run('agent-charge-seq', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-charge-seq'), 'worker-1');
end
$$;

select is(
    runlane.charge(runlane_test.last_run('agent-charge-seq'), 1, 5.0, 1),
    5.0::numeric,
    'the first charge (seq 1) returns the run''s total'
);
select is(
    runlane.charge(runlane_test.last_run('agent-charge-seq'), 1, 5.0, 1),
    5.0::numeric,
    'its resend answers the same total'
);
select is(
    runlane.charge(runlane_test.last_run('agent-charge-seq'), 1, 2.5, 2),
    7.5::numeric,
    'seq 2 is a new charge'
);
select is(
    (select count(*)::int from runlane.charges where run_id = runlane_test.last_run('agent-charge-seq')),
    2,
    'the ledger holds each charge once'
);
select is(
    runlane.charge(runlane_test.last_run('agent-charge-seq'), 1, 1.0),
    8.5::numeric,
    'the contract form (no number) always records'
);
select throws_ok(
    format('select runlane.charge(%s, 0, 1.0, 3)', runlane_test.last_run('agent-charge-seq')),
    'RL001',
    null,
    'a numbered charge of a fenced-out caller is refused'
);

select * from finish();
rollback;
