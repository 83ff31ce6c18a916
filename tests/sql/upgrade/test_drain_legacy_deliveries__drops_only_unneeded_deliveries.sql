begin;
select plan(6);

select function_privs_are(
    'runlane', 'drain_legacy_deliveries', array['integer'], 'runlane_worker', array['EXECUTE'],
    'workers may drain legacy deliveries'
);

do $$ begin perform runlane_test.agent('agent-q'); end $$;
do $$ begin perform runlane_test.agent('agent-f'); end $$;
do $$ begin perform runlane_test.agent('agent-g'); end $$;
do $$ begin perform runlane_test.agent('agent-h'); end $$;

create temporary table jobs_under_test (label text primary key, job_id bigint);

insert into jobs_under_test (label, job_id) values
('queued run', runlane_test.legacy_delivery(runlane_test.queued_run('agent-q'))),
('finished run', runlane_test.legacy_delivery(runlane_test.finished_run('agent-f'))),
('held', runlane_test.legacy_delivery(runlane_test.finished_run('agent-g'), now())),
(
    'crashed holder',
    runlane_test.legacy_delivery(runlane_test.finished_run('agent-h'), now() - interval '5 hours')
),
('unknown run', runlane_test.legacy_delivery(-1));

insert into runlane.run_jobs (task, payload) values ('create_run', '{"agent_id": "agent-f"}');

select is(runlane.drain_legacy_deliveries(1), 1, 'at most p_limit deliveries per call');
select is(runlane.drain_legacy_deliveries(), 2, 'the next call takes the rest that is droppable');

select results_eq(
    $$select t.label from jobs_under_test as t
      where exists (select 1 from runlane.run_jobs as j where j.id = t.job_id)
      union all
      select j.task from runlane.run_jobs as j where j.task = 'create_run'
      order by 1$$,
    $$values ('create_run'), ('held'), ('queued run')$$,
    'deliveries of a queued run, held deliveries and other jobs stay'
);

select is(runlane.drain_legacy_deliveries(), 0, 'nothing droppable is left');

select throws_ok(
    'select runlane.drain_legacy_deliveries(-1)', '22023',
    null, 'a negative limit is refused'
);

select * from finish();
rollback;
