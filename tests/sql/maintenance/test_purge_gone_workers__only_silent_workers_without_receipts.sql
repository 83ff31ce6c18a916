-- Retention covers the worker registry: purge_gone_workers deletes the rows of workers
-- silent for the whole window that hold no claim receipt and no running run, never a
-- live worker's row nor an older generation's (the upgrade reads those).
begin;
select plan(8);

do $$
declare
    v_run bigint;
begin
    perform runlane_test.agent('agent-w', 'org-w');
    perform runlane.register_worker('worker-live', array['interactive']);
    insert into runlane.workers (worker_id, generation, lanes, heartbeat_at, stopped_at)
    values ('worker-gone-1', 2, array['interactive'], now() - interval '30 days', now() - interval '30 days'),
           ('worker-gone-2', 2, array['background'], now() - interval '20 days', null),
           ('worker-receipt', 2, array['interactive'], now() - interval '30 days', null),
           ('worker-running', 2, array['background'], now() - interval '30 days', null),
           ('worker-recent', 2, array['interactive'], now() - interval '2 days', null);
    insert into runlane.workers (worker_id, generation, deliveries, lanes, heartbeat_at)
    values ('worker-legacy', 1, 'legacy', '{}', now() - interval '30 days');
    insert into runlane.claim_receipts (worker_id, lanes, claim_key, claimed_at)
    values ('worker-receipt', array['interactive'], gen_random_uuid(), now() - interval '30 days');
    -- a run the silent worker still holds (the reaper's, not retention's, to end)
    v_run := runlane_test.queued_run('agent-w', 'background', 'manual');
    update runlane.runs
    set state = 'running', lease_owner = 'worker-running', attempts = 1, fence = 1,
        lease_expires_at = now() - interval '29 days'
    where run_id = v_run;
end
$$;

select is(
    runlane.purge_gone_workers(interval '8 days', 1), 1,
    'at most p_limit rows per call'
);
select is(
    runlane.purge_gone_workers(interval '8 days'), 1,
    'then the rest of the silent workers'
);
select results_eq(
    $$select worker_id from runlane.workers order by worker_id$$,
    $$values ('worker-legacy'::text), ('worker-live'), ('worker-receipt'), ('worker-recent'),
             ('worker-running')$$,
    'a live, a recent, an older generation''s and a worker with a receipt or a running run stay'
);
select is(
    runlane.purge_gone_workers(interval '8 days'), 0,
    'nothing more'
);
select is(
    (runlane.purge_stale_claim_receipts(interval '8 days'), runlane.purge_gone_workers(interval '8 days')),
    (1, 1),
    'once its receipt is purged, the silent worker''s row goes too'
);

select throws_ok(
    $$select runlane.purge_gone_workers(interval '59 minutes')$$, '22023', null,
    'a window under an hour is refused'
);
select throws_ok(
    $$select runlane.purge_gone_workers(interval '8 days', 0)$$, '22023', null,
    'a limit under 1 is refused'
);
select is(
    has_function_privilege('runlane_api', 'runlane.purge_gone_workers(interval, int)', 'execute'),
    false,
    'an application cannot purge the registry'
);

select * from finish();
rollback;
