-- finish_runs finishes runs on computers together with the rest of a batch: each run's
-- computer lease (that row only) is freed and the next run waiting on the computer is
-- woken, without the run-by-run path. A run that no longer holds its computer sends the
-- batch run by run: it alone is refused with RL001, the others finish.
begin;
select plan(9);

set local track_functions = 'pl';

do $$
begin
    perform runlane_test.agent('agent-pc1', 'org-pc', 'computer-1');
    perform runlane_test.agent('agent-pc2', 'org-pc', 'computer-2');
    perform runlane_test.agent('agent-pc1-next', 'org-pc', 'computer-1');
    perform runlane_test.agent('agent-chat', 'org-pc');
end
$$;
create temp table f on commit drop as
select
    'chat' as k,
    s.run_id,
    runlane_test.claimed(s.run_id) as fence
from runlane.submit_message('agent-chat', 'thread-1', 'hello') as s;
do $$
begin
    perform runlane_test.queued_run('agent-pc1', 'background', 'manual');
    insert into f (k, run_id, fence)
    values ('pc1', runlane_test.last_run('agent-pc1'),
            runlane_test.claimed_on_computer(runlane_test.last_run('agent-pc1'), 'worker-1'));
    perform runlane_test.queued_run('agent-pc2', 'background', 'manual');
    insert into f (k, run_id, fence)
    values ('pc2', runlane_test.last_run('agent-pc2'),
            runlane_test.claimed_on_computer(runlane_test.last_run('agent-pc2'), 'worker-1'));
    -- a run waiting on computer-1 behind pc1
    perform runlane_test.queued_run('agent-pc1-next', 'background', 'manual');
end
$$;

create temp table c0 on commit drop as
select coalesce(sum(x.calls), 0)::int as calls from pg_stat_xact_user_functions as x
where x.schemaname = 'runlane' and x.funcname in ('_require_owner', '_close_run_with');
create temp table r on commit drop as
select * from runlane.finish_runs(
    array(select run_id from f order by k), array(select fence from f order by k),
    array['succeeded', 'succeeded', 'failed'], array[null, null, 'error']::text[],
    array[0, 0, 0]::numeric[], array[1, 0, 0], array['final'], array['reply'],
    array[1, 1, 1]::bigint[]
);

select results_eq(
    $$select f.k, r.ok, r.sqlstate from r join f using (run_id) order by f.k$$,
    $$values ('chat', true, null::text), ('pc1', true, null::text), ('pc2', true, null::text)$$,
    'every run is finished'
);
select is(
    (
        select coalesce(sum(x.calls), 0)::int from pg_stat_xact_user_functions as x
        where x.schemaname = 'runlane' and x.funcname in ('_require_owner', '_close_run_with')
    ) - (select calls from c0),
    0,
    'runs on computers are finished together with the rest of the batch'
);
select is_empty(
    $$select from runlane.computer_leases where computer_id in ('computer-1', 'computer-2')$$,
    'each run''s computer lease is freed'
);
select is(
    (
        select x.calls::int from pg_stat_xact_user_functions as x
        where x.schemaname = 'runlane' and x.funcname = '_notify_computer_waiter'
    ),
    2,
    'the next run waiting on each freed computer is looked up (and notified)'
);
select results_eq(
    $$select f.k, ru.state from f join runlane.runs as ru using (run_id) order by f.k$$,
    $$values ('chat', 'succeeded'), ('pc1', 'succeeded'), ('pc2', 'failed')$$,
    'each run closes with its outcome'
);
select is(
    (
        select count(*)::int from runlane.run_events as e
        where e.event = 'run.finished' and e.run_id in (select run_id from f)
    ),
    3,
    'run.finished is journaled once per run'
);

-- pc3 lost its computer (its lease row was taken over and is gone): the batch goes run by run.
do $$
begin
    perform runlane_test.queued_run('agent-pc2', 'background', 'manual');
    insert into f (k, run_id, fence)
    values ('pc3', runlane_test.last_run('agent-pc2'),
            runlane_test.claimed_on_computer(runlane_test.last_run('agent-pc2'), 'worker-1'));
    delete from runlane.computer_leases where run_id = runlane_test.last_run('agent-pc2');
end
$$;
insert into f (k, run_id, fence)
select
    'chat2' as k,
    s.run_id,
    runlane_test.claimed(s.run_id) as fence
from runlane.submit_message('agent-chat', 'thread-2', 'hello') as s;
create temp table r2 on commit drop as
select * from runlane.finish_runs(
    array(select run_id from f where k in ('chat2', 'pc3') order by k),
    array(select fence from f where k in ('chat2', 'pc3') order by k),
    array['succeeded', 'succeeded'], array[null, null]::text[],
    array[0, 0]::numeric[], array[0, 0], '{}'::text[], '{}'::text[],
    array[1, 1]::bigint[]
);
select results_eq(
    $$select f.k, r2.ok, r2.sqlstate from r2 join f using (run_id) order by f.k$$,
    $$values ('chat2', true, null::text), ('pc3', false, 'RL001')$$,
    'a run that lost its computer is refused with RL001; the other finishes'
);
select results_eq(
    $$select f.k, ru.state from f join runlane.runs as ru using (run_id) where f.k in ('chat2', 'pc3') order by f.k$$,
    $$values ('chat2', 'succeeded'), ('pc3', 'running')$$,
    'the refused run is left as it was'
);
select ok(
    (
        select coalesce(sum(x.calls), 0)::int from pg_stat_xact_user_functions as x
        where x.schemaname = 'runlane' and x.funcname = '_require_owner'
    ) > (select calls from c0),
    'that batch went run by run'
);

select * from finish();
rollback;
