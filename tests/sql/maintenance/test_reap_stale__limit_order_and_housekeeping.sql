-- reap_stale takes at most p_limit runs, oldest expiry first, judges expiry against
-- p_now, validates its arguments and deletes expired leftovers from computer_leases.
begin;
select plan(10);

do $$
declare
    v_i int;
begin
    for v_i in 1..3 loop
        perform runlane_test.agent('agent-' || v_i, 'org-limit', 'computer-' || v_i);
        perform runlane_test.queued_run('agent-' || v_i, 'background', 'manual');
        perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-' || v_i), 'worker-dead');
    end loop;
    -- agent-2 expired longest ago, then agent-3, then agent-1.
    perform runlane_test.lease_expired(runlane_test.last_run('agent-1'), interval '1 minute');
    perform runlane_test.lease_expired(runlane_test.last_run('agent-2'), interval '3 minutes');
    perform runlane_test.lease_expired(runlane_test.last_run('agent-3'), interval '2 minutes');
end
$$;

select throws_ok('select * from runlane.reap_stale(now(), 0)', '22023', null, 'a limit of 0 is refused with 22023');
select throws_ok(
    'select * from runlane.reap_stale(now(), 10001)', '22023', null, 'a limit over 10000 is refused with 22023'
);
select throws_ok('select * from runlane.reap_stale(null, 10)', '22004', null, 'a null now is refused with 22004');

select is_empty(
    $$select * from runlane.reap_stale(now() - interval '5 minutes')$$,
    'nothing had expired five minutes ago'
);
select results_eq(
    'select r.run_id from runlane.reap_stale(now(), 2) as r',
    $$values (runlane_test.last_run('agent-2')), (runlane_test.last_run('agent-3'))$$,
    'a limit of 2 reaps the two runs whose leases expired first, oldest first'
);
select is(
    (select r.state from runlane.runs as r where r.run_id = runlane_test.last_run('agent-1')),
    'running',
    'the run beyond the limit is still running'
);
select results_eq(
    'select r.run_id from runlane.reap_stale(now(), 2) as r',
    $$values (runlane_test.last_run('agent-1'))$$,
    'the next pass reaps the rest'
);

-- p_now decides expiry: a lease still live now is stale two minutes from now.
do $$
begin
    perform runlane_test.queued_run('agent-1', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-1'), 'worker-live');
end
$$;
select results_eq(
    $$select r.run_id from runlane.reap_stale(now() + interval '2 minutes') as r$$,
    $$values (runlane_test.last_run('agent-1'))$$,
    'a lease that expires before p_now is reaped'
);

-- Housekeeping: an expired computer lease whose run is no longer running goes.
do $$
begin
    insert into runlane.computer_leases (computer_id, run_id, fence, expires_at, org_id)
    values ('computer-leftover', runlane_test.last_run('agent-2'), 1, now() - interval '1 minute', 'org-limit'),
           ('computer-fresh', runlane_test.last_run('agent-3'), 1, now() + interval '1 minute', 'org-limit');
end
$$;
select is_empty(
    'select * from runlane.reap_stale()',
    'housekeeping reports no runs'
);
select results_eq(
    $$select cl.computer_id from runlane.computer_leases as cl
      where cl.computer_id in ('computer-leftover', 'computer-fresh')$$,
    $$values ('computer-fresh'::text)$$,
    'an expired leftover computer lease is deleted, an unexpired one is kept'
);

select * from finish();
rollback;
