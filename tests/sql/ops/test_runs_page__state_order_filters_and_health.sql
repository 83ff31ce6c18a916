-- runs_page: each state in the order an operator reads it (queue oldest first, running
-- runs longest silent first, finished ones newest first within the window), the lane,
-- organization, agent and thread filters, and a running run's health: stale once its
-- last heartbeat is older than half its lease, long before the lease expires.
begin;
select plan(14);

do $$ begin
    perform runlane_test.agent('agent-p', 'org-p');
    perform runlane_test.agent('agent-q', 'org-q');
end $$;
create temp table t (name text primary key, run_id bigint) on commit drop;
insert into t
select
    'q' || s.n as name,
    runlane_test.queued_run(
        case when s.n = 2 then 'agent-q' else 'agent-p' end, 'interactive', 'interactive'
    ) as run_id
from generate_series(1, 3) as s (n);
-- created oldest first in the order q3, q1, q2 (q3 an hour back)
update runlane.runs set created_at = now() - interval '1 hour'
where run_id = (select run_id from t where name = 'q3');
update runlane.runs set created_at = now() - interval '10 minutes'
where run_id = (select run_id from t where name = 'q1');
insert into t values ('bg', runlane_test.queued_run('agent-q', 'background', 'scheduled'));
update runlane.runs set created_at = now() - interval '30 minutes'
where run_id = (select run_id from t where name = 'bg');

select results_eq(
    $$select p.run_id from runlane.runs_page('queued') as p$$,
    $$select run_id from t where name in ('q3', 'bg', 'q1', 'q2')
      order by array_position(array['q3', 'bg', 'q1', 'q2'], name)$$,
    'the queue oldest first, across lanes and claim classes'
);
select results_eq(
    $$select p.run_id from runlane.runs_page('queued', p_lane => 'interactive', p_limit => 2) as p$$,
    $$select run_id from t where name in ('q3', 'q1') order by name = 'q1'$$,
    'a lane filter and a page size'
);
select results_eq(
    $$select p.run_id from runlane.runs_page('queued', p_org_id => 'org-q') as p$$,
    $$select run_id from t where name in ('bg', 'q2') order by name = 'q2'$$,
    'an organization filter'
);

-- Two running runs of 60 s leases: one beat just now, one 40 s ago (a 20 s beat late).
insert into t values ('fresh', runlane_test.queued_run('agent-p', 'interactive', 'interactive'));
insert into t values ('silent', runlane_test.queued_run('agent-q', 'interactive', 'interactive'));
do $$ begin
    perform runlane_test.claimed((select run_id from t where name = 'fresh'), 'worker-1');
    perform runlane_test.claimed((select run_id from t where name = 'silent'), 'worker-2');
end $$;
update runlane.runs
set heartbeat_at = now() - interval '40 seconds', lease_expires_at = now() + interval '20 seconds'
where run_id = (select run_id from t where name = 'silent');

select results_eq(
    $$select p.run_id, p.worker, p.health from runlane.runs_page('running') as p$$,
    $$select t.run_id, w.worker, w.health from t
      join (values ('silent', 'worker-2', 'stale'), ('fresh', 'worker-1', 'healthy'))
        as w (name, worker, health) using (name)
      order by t.name = 'fresh'$$,
    'running runs longest silent first: the one 40 s silent on a 60 s lease is stale'
);
select ok(
    (
        select p.heartbeat_age_ms between 39000 and 60000
        from runlane.runs_page('running') as p where p.health = 'stale'
    ),
    'the heartbeat age is read in milliseconds'
);
select is(
    (
        select p.health from runlane.runs_page('running', p_now => now() + interval '25 seconds') as p
        where p.worker = 'worker-1'
    ),
    'healthy',
    'a beat 25 s old on a 60 s lease is within one beat interval and its slack'
);
select is(
    (
        select p.health from runlane.runs_page('running', p_now => now() + interval '31 seconds') as p
        where p.worker = 'worker-1'
    ),
    'stale',
    'past half the lease without a beat: stale'
);

-- Finished runs: failed a minute ago, failed two hours ago, succeeded just now.
insert into t values ('failed', runlane_test.queued_run('agent-p', 'interactive', 'interactive'));
insert into t values ('old', runlane_test.queued_run('agent-p', 'interactive', 'interactive'));
insert into t values ('ok', runlane_test.queued_run('agent-p', 'interactive', 'interactive'));
update runlane.runs
set
    state = 'failed', reason = 'error', finished_at = now() - interval '1 minute',
    last_error = 'ValueError: the user wrote something'
where run_id = (select run_id from t where name = 'failed');
update runlane.runs
set state = 'failed', reason = 'error', finished_at = now() - interval '2 hours'
where run_id = (select run_id from t where name = 'old');
update runlane.runs set state = 'succeeded', finished_at = now()
where run_id = (select run_id from t where name = 'ok');

select results_eq(
    $$select p.run_id, p.error_class from runlane.runs_page('failed') as p$$,
    $$select run_id, 'ValueError'::text from t where name = 'failed'$$,
    'failed in the last hour, with the error class and never its message'
);
select is(
    (select count(*)::int from runlane.runs_page('failed', p_since => '3 hours')),
    2,
    'a wider window'
);
select results_eq(
    $$select p.run_id from runlane.runs_page(p_agent_id => 'agent-p', p_limit => 3) as p$$,
    $$select run_id from t where name in ('ok', 'failed', 'old') order by run_id desc$$,
    'every state of an agent, newest first'
);

insert into t select
    'chat' as name,
    s.run_id
from runlane.submit_message('agent-p', 'thread-p', 'hi') as s;
select results_eq(
    $$select p.run_id from runlane.runs_page(p_agent_id => 'agent-p', p_thread_id => 'thread-p') as p$$,
    $$select run_id from t where name = 'chat'$$,
    'a thread of an agent'
);
select throws_ok(
    $$select * from runlane.runs_page(p_thread_id => 'thread-p')$$, '22023', null,
    'a thread without its agent is refused'
);
select throws_ok(
    $$select * from runlane.runs_page('stuck')$$, '22023', null, 'an unknown state is refused'
);
select throws_ok(
    $$select * from runlane.runs_page('queued', p_limit => 0)$$, '22023', null,
    'a page size outside 1 .. 1000 is refused'
);

select * from finish();
rollback;
