-- A run whose computer is leased by another run stays queued and untouched, while
-- unrelated runs are claimed; after release or expiry it is claimable.
begin;
select plan(9);

do $$ begin perform runlane_test.agent('agent-a', 'org-a', 'computer-1'); end $$;
do $$ begin perform runlane_test.agent('agent-b', 'org-a', 'computer-1'); end $$;
do $$ begin perform runlane_test.agent('agent-c', 'org-a', null); end $$;
create temp table r on commit drop as
select runlane_test.queued_run('agent-a') as a;

create temp table first_claim on commit drop as
select * from runlane.claim_runs('worker-1', array['background']);

select is((select count(*) from first_claim), 1::bigint, 'the first run on the computer is claimed');
select is(
    (select run_id || '/' || fence from runlane.computer_leases where computer_id = 'computer-1'),
    (select run_id || '/' || fence from first_claim),
    'the claim took the computer lease with the run''s fence'
);
select is(
    (select expires_at from runlane.computer_leases where computer_id = 'computer-1'),
    now() + interval '60 seconds',
    'the computer lease lasts as long as the run lease'
);

alter table r add column b bigint, add column c bigint;
update r set b = runlane_test.queued_run('agent-b'), c = runlane_test.queued_run('agent-c');

create temp table second_claim on commit drop as
select * from runlane.claim_runs('worker-2', array['background']);

select is(
    (select array_agg(run_id) from second_claim),
    array[(select c from r)],
    'the unrelated run is claimed, the waiter on the leased computer is not'
);
select is(
    (select state || '/' || attempts || '/' || fence from runlane.runs where run_id = (select b from r)),
    'queued/0/0',
    'the waiter is untouched: no attempt counted, no fence taken'
);

-- The owner's lease expires without a release: the waiter may take the computer.
update runlane.computer_leases set expires_at = now() - interval '1 second' where computer_id = 'computer-1';

create temp table third_claim on commit drop as
select * from runlane.claim_runs('worker-3', array['background']);

select is(
    (select array_agg(run_id) from third_claim),
    array[(select b from r)],
    'after the lease expired the waiter is claimed'
);
select is(
    (select run_id from runlane.computer_leases where computer_id = 'computer-1'),
    (select b from r),
    'the waiter now holds the computer lease'
);
select isnt(
    (select first_started_at from runlane.runs where run_id = (select b from r)),
    null,
    'execution timing of the waiter starts only now'
);

-- Two waiters on one computer in the same batch: only one gets it.
do $$ begin perform runlane_test.agent('agent-d', 'org-b', 'computer-2'); end $$;
do $$ begin perform runlane_test.agent('agent-e', 'org-b', 'computer-2'); end $$;
do $$ begin perform runlane_test.queued_run('agent-d'); perform runlane_test.queued_run('agent-e'); end $$;
select is(
    (select count(*) from runlane.claim_runs('worker-4', array['background'])),
    1::bigint,
    'two runs wanting one free computer in one batch: exactly one is claimed'
);

select * from finish();
rollback;
