-- A run whose computer lease expired and was taken over by another run's claim has lost
-- the computer: its heartbeat says false and extends nothing, so it cannot keep working
-- beside the new owner.
begin;
select plan(4);

do $$ begin perform runlane_test.agent('agent-slow', 'org-a', 'computer-1'); end $$;
do $$ begin perform runlane_test.agent('agent-next', 'org-a', 'computer-1'); end $$;
create temp table r on commit drop as
select runlane_test.queued_run('agent-slow') as slow;
create temp table slow_claim on commit drop as
select * from runlane.claim_runs('worker-1', array['background']);

-- The slow run's owner stops heartbeating; its leases expire before anyone reaps it.
do $$ begin perform runlane_test.lease_expired((select slow from r)); end $$;
alter table r add column next bigint;
update r set next = runlane_test.queued_run('agent-next');
create temp table next_claim on commit drop as
select * from runlane.claim_runs('worker-2', array['background']);

select is(
    (select run_id from next_claim), (select next from r),
    'the waiter took the computer once the lease expired'
);
select is(
    runlane.heartbeat((select slow from r), (select fence from slow_claim)),
    false,
    'the old owner''s heartbeat reports the loss'
);
select cmp_ok(
    (select lease_expires_at from runlane.runs where run_id = (select slow from r)), '<', now(),
    'the old owner''s run lease was not extended'
);
select is(
    (select run_id from runlane.computer_leases where computer_id = 'computer-1'), (select next from r),
    'the computer lease stays with the new owner'
);

select * from finish();
rollback;
