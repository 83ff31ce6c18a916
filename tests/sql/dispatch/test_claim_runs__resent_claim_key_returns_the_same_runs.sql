-- A claim resent with the same key after a lost reply returns the runs
-- and fences the first call claimed (still running under them), claims nothing new and
-- counts no attempt; a new key claims anew; the four-argument form is unchanged.
begin;
select plan(8);

do $$
begin
    perform runlane_test.agent('agent-a', 'org-key');
    perform runlane_test.agent('agent-b', 'org-key');
    perform runlane_test.queued_run('agent-a', 'background', 'manual');
    perform runlane_test.queued_run('agent-b', 'background', 'manual');
end
$$;

create temp table first_claim on commit drop as
select * from runlane.claim_runs(
    'worker-1', array['background'], 1, interval '60 seconds', '00000000-0000-0000-0000-00000000000a'
);
create temp table resent on commit drop as
select * from runlane.claim_runs(
    'worker-1', array['background'], 1, interval '60 seconds', '00000000-0000-0000-0000-00000000000a'
);

select is((select count(*) from first_claim), 1::bigint, 'the first call claims one run');
select results_eq(
    'select run_id, fence, attempt, prompt from resent',
    'select run_id, fence, attempt, prompt from first_claim',
    'the resend returns the same run, fence and attempt'
);
select is(
    (select count(*) from runlane.runs where org_id = 'org-key' and state = 'running'),
    1::bigint,
    'the resend claimed nothing more'
);
select is(
    (
        select count(*) from runlane.run_events as e
        where e.run_id = (select f.run_id from first_claim as f) and e.event = 'run.claimed'
    ),
    1::bigint,
    'one run.claimed journal row'
);
select is(
    (
        select count(*) from runlane.claim_runs(
            'worker-2', array['background'], 1, interval '60 seconds', '00000000-0000-0000-0000-00000000000a'
        )
    ),
    1::bigint,
    'the same key from another worker is another claim'
);

do $$
begin
    perform runlane.finish_run(f.run_id, f.fence, 'succeeded') from first_claim as f;
end
$$;
select is(
    (
        select count(*) from runlane.claim_runs(
            'worker-1', array['background'], 1, interval '60 seconds', '00000000-0000-0000-0000-00000000000a'
        )
    ),
    0::bigint,
    'a resend after its run finished returns nothing (a run no longer running is left out)'
);
select is(
    (
        select count(*) from runlane.claim_runs(
            'worker-1', array['background'], 1, interval '60 seconds', null::uuid
        )
    ),
    0::bigint,
    'a null key is the plain claim (nothing left to claim)'
);
select is(
    (select count(*) from runlane_test.claim_receipts() where worker_id = 'worker-1'),
    1::bigint,
    'one receipt per worker and lane set'
);

select * from finish();
rollback;
