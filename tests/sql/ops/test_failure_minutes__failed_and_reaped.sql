-- failure_minutes: per minute, the runs that failed and the runs reap_stale took back
-- from a silent worker (requeued or closed stale), one row per minute of the window.
begin;
select plan(5);

do $$ begin perform runlane_test.agent('agent-f', 'org-f'); end $$;
create temp table t (name text primary key, run_id bigint) on commit drop;
insert into t values
('chat', runlane_test.queued_run('agent-f', 'interactive', 'interactive')),
('bg', runlane_test.queued_run('agent-f', 'background', 'manual')),
('err', runlane_test.queued_run('agent-f', 'interactive', 'interactive')),
('ok', runlane_test.queued_run('agent-f', 'interactive', 'interactive'));
do $$
declare
    v_fence bigint;
begin
    perform runlane_test.claimed((select run_id from t where name = 'chat'));
    perform runlane_test.claimed((select run_id from t where name = 'bg'));
    perform runlane_test.lease_expired((select run_id from t where name = 'chat'));
    perform runlane_test.lease_expired((select run_id from t where name = 'bg'));
    perform runlane.reap_stale();
    v_fence := runlane_test.claimed((select run_id from t where name = 'err'));
    perform runlane.finish_run((select run_id from t where name = 'err'), v_fence, 'failed');
    v_fence := runlane_test.claimed((select run_id from t where name = 'ok'));
    perform runlane.finish_run((select run_id from t where name = 'ok'), v_fence, 'succeeded');
end $$;

select is(
    (select count(*)::int from runlane.failure_minutes('1 hour')),
    60,
    'one row per minute of the window'
);
select results_eq(
    $$select failed, reaped from runlane.failure_minutes('10 minutes', now() + interval '1 second')
      order by minute_end desc limit 1$$,
    $$values (2, 2)$$,
    'this minute: the stale background run and the error failed; both reaped runs counted'
);
select is(
    (select sum(failed + reaped)::int from runlane.failure_minutes('10 minutes', now() + interval '1 second')),
    4,
    'nothing counted twice across minutes'
);
select is(
    (
        select sum(failed + reaped)::int
        from runlane.failure_minutes('10 minutes', now() - interval '2 minutes')
    ),
    0,
    'a window that ended before: nothing'
);
select throws_ok(
    $$select * from runlane.failure_minutes('2 days')$$, '22023', null,
    'a window over a day is refused'
);

select * from finish();
rollback;
