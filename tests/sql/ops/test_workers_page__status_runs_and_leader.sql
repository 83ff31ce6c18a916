-- workers_page: every registered worker and every lease owner, with its host, lanes,
-- running and stale runs, whether it leads maintenance and its status (alive, stale,
-- gone, stopped).
begin;
select plan(5);

do $$ begin
    perform runlane_test.agent('agent-w', 'org-w');
    perform runlane.register_worker('hostA-4242-abc123', array['interactive']);
    perform runlane.register_worker('quiet', array['background']);
    perform runlane.register_worker('chat-1', array['interactive'], false, array['chat'], 'box-7', 4242);
    perform runlane.register_worker('done', array['interactive', 'background'], true);
end $$;
update runlane.workers set heartbeat_at = now() - interval '5 minutes' where worker_id = 'quiet';
create temp table t (name text primary key, run_id bigint) on commit drop;
insert into t values
('a', runlane_test.queued_run('agent-w', 'interactive', 'interactive')),
('b', runlane_test.queued_run('agent-w', 'interactive', 'interactive')),
('c', runlane_test.queued_run('agent-w', 'interactive', 'interactive'));
do $$ begin
    perform runlane_test.claimed((select run_id from t where name = 'a'), 'hostA-4242-abc123');
    perform runlane_test.claimed((select run_id from t where name = 'b'), 'hostA-4242-abc123');
    perform runlane_test.claimed((select run_id from t where name = 'c'), 'unregistered');
end $$;
-- c's worker went silent 40 s ago on a 60 s lease
update runlane.runs
set heartbeat_at = now() - interval '40 seconds', lease_expires_at = now() + interval '20 seconds'
where run_id = (select run_id from t where name = 'c');
do $$ begin perform runlane.lead_maintenance('runlane-worker:hostA-4242-abc123/0123abcd', interval '30 seconds'); end $$;

select results_eq(
    $$select worker_id, host, lanes, running, stale, leads_maintenance, status
      from runlane.workers_page()$$,
    $$values
        ('chat-1'::text, 'box-7'::text, array['interactive'], 0, 0, false, 'alive'::text),
        ('done', null, array['interactive', 'background'], 0, 0, false, 'stopped'),
        ('hostA-4242-abc123', 'hostA', array['interactive'], 2, 0, true, 'alive'),
        ('quiet', null, array['background'], 0, 0, false, 'gone'),
        ('unregistered', null, null, 1, 1, false, 'stale')$$,
    'each worker with its runs, the maintenance leader and its status'
);
select is(
    (select handlers from runlane.workers_page() where worker_id = 'chat-1'),
    array['chat'],
    'a worker names the host it registered and the handlers it serves'
);
select is(
    (select count(*)::int from runlane.workers_page() where handlers is null),
    4,
    'a worker registered without handlers serves any: its handlers are null'
);
select is(
    (
        select status from runlane.workers_page(now() + interval '31 seconds')
        where worker_id = 'hostA-4242-abc123'
    ),
    'stale',
    'a worker whose runs miss their beat reads stale'
);
select throws_ok(
    $$select * from runlane.workers_page(null)$$, '22004', null, 'a null instant is refused'
);

select * from finish();
rollback;
