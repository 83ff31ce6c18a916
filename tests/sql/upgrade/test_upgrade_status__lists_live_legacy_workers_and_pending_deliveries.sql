begin;
select plan(7);

select is_definer('runlane', 'upgrade_status', '{}'::name[], 'upgrade_status runs as its owner');
select function_privs_are(
    'runlane', 'upgrade_status', '{}'::name[], 'runlane_worker', array['EXECUTE'],
    'workers may read the upgrade status'
);

select is_empty(
    'select * from runlane.upgrade_status()',
    'nothing blocks the contract step on a clean database'
);

insert into runlane.workers (worker_id, generation, deliveries, heartbeat_at, stopped_at)
values
('old-live', 1, 'legacy', now(), null),
('old-stopped', 1, 'legacy', now(), now()),
('old-silent', 1, 'legacy', now() - interval '3 minutes', null),
('new-live', 2, 'direct', now(), null);

select results_eq(
    $$select blocker, split_part(detail, ' (', 1) from runlane.upgrade_status()$$,
    $$values ('live legacy workers', 'old-live')$$,
    'a live legacy worker is listed; stopped, silent and new-generation workers are not'
);

do $$ begin perform runlane_test.agent('agent-u'); end $$;
insert into runlane.run_jobs (task, payload, attempts, max_attempts)
values
('run_agent', jsonb_build_object('run_id', runlane_test.queued_run('agent-u')), 0, 25),
('run_agent', '{"run_id": 0}', 25, 25),
('create_run', '{"agent_id": "agent-u"}', 0, 25);

select results_eq(
    $$select blocker from runlane.upgrade_status()$$,
    $$values ('live legacy workers'), ('pending legacy run deliveries')$$,
    'a pending run delivery is listed after the workers'
);

select is(
    (select detail from runlane.upgrade_status() where blocker = 'pending legacy run deliveries'),
    (
        select format('job %s for run %s', j.id, j.payload ->> 'run_id')
        from runlane.run_jobs as j
        where j.task = 'run_agent' and j.attempts = 0
    ),
    'only the delivery with attempts left is listed, by job and run; other tasks are not'
);

update runlane.workers set stopped_at = now() where worker_id = 'old-live';
delete from runlane.run_jobs where task = 'run_agent' and attempts = 0;

select is_empty(
    'select * from runlane.upgrade_status()',
    'once the worker stopped and the delivery drained, nothing blocks'
);

select * from finish();
rollback;
