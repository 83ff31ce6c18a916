-- Retention covers claim receipts: purge_stale_claim_receipts deletes the receipts of
-- workers long gone (their last claim and their registry row both older than the window),
-- never a live worker's (its registry row is fresh, however old its last claim), nor a
-- recent claim's; a live worker's resent claim still returns its runs.
begin;
select plan(10);

do $$
declare
    v_run bigint;
begin
    perform runlane_test.agent('agent-r', 'org-r');
    -- a live worker: registered now; its keyed claim, made long ago as far as the
    -- receipt says, holds a running run
    perform runlane.register_worker('worker-live', array['interactive']);
    v_run := runlane_test.queued_run('agent-r', 'interactive', 'interactive');
    perform runlane.claim_runs('worker-live', array['interactive'], 10, interval '60 seconds',
                               'a0000000-0000-4000-8000-000000000001'::uuid);
    update runlane.claim_receipts set claimed_at = now() - interval '30 days'
    where worker_id = 'worker-live';
    -- a worker gone for a month (stopped, silent since); two of its receipts
    insert into runlane.workers (worker_id, generation, lanes, heartbeat_at, stopped_at)
    values ('worker-gone', 2, array['interactive'], now() - interval '30 days',
            now() - interval '30 days');
    insert into runlane.claim_receipts (worker_id, lanes, claim_key, claimed_at)
    values ('worker-gone', array['interactive'], gen_random_uuid(), now() - interval '30 days'),
           ('worker-gone', '{}', gen_random_uuid(), now() - interval '31 days');
    -- a worker never registered: an old receipt and a recent one (another lane set)
    insert into runlane.claim_receipts (worker_id, lanes, claim_key, claimed_at)
    values ('worker-sql', array['background'], gen_random_uuid(), now() - interval '20 days'),
           ('worker-sql', array['interactive'], gen_random_uuid(), now() - interval '1 hour');
end
$$;

select is(
    runlane.purge_stale_claim_receipts(interval '8 days', 2), 2,
    'at most p_limit receipts per call, the oldest first'
);
select results_eq(
    $$select worker_id, lanes from runlane.claim_receipts order by worker_id, lanes$$,
    $$values ('worker-live'::text, array['interactive']::text[]),
             ('worker-sql', array['background']), ('worker-sql', array['interactive'])$$,
    'the gone worker''s receipts went first'
);
select is(
    runlane.purge_stale_claim_receipts(interval '8 days'), 1,
    'then the unregistered worker''s old receipt'
);
select results_eq(
    $$select worker_id, lanes from runlane.claim_receipts order by worker_id, lanes$$,
    $$values ('worker-live'::text, array['interactive']::text[]),
             ('worker-sql', array['interactive'])$$,
    'a live worker''s receipt (however old its claim) and a recent claim''s stay'
);
select is(
    runlane.purge_stale_claim_receipts(interval '8 days'), 0,
    'nothing more'
);
select results_eq(
    $$select count(*)::int from runlane.claim_runs('worker-live', array['interactive'], 10,
          interval '60 seconds', 'a0000000-0000-4000-8000-000000000001'::uuid)$$,
    $$values (1)$$,
    'the live worker''s resent claim still returns its run'
);

select throws_ok(
    $$select runlane.purge_stale_claim_receipts(interval '59 minutes')$$, '22023', null,
    'a window under an hour is refused'
);
select throws_ok(
    $$select runlane.purge_stale_claim_receipts(interval '8 days', 0)$$, '22023', null,
    'a limit under 1 is refused'
);
select throws_ok(
    $$select runlane.purge_stale_claim_receipts(null)$$, '22004', null,
    'a null window is refused'
);
select is(
    has_function_privilege('runlane_api', 'runlane.purge_stale_claim_receipts(interval, int)', 'execute'),
    false,
    'an application cannot purge receipts'
);

select * from finish();
rollback;
