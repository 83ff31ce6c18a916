-- The end-of-stream rule rests on this: once run_status says a run is terminal, no output
-- can follow (its last_output_id is final). A succeeded, a failed and a canceled run each
-- refuse another output from the worker that ran it, and a finished run is never claimed.
begin;
select plan(7);

do $$ begin perform runlane_test.agent('agent-e', 'org-e'); end $$;
create temp table r on commit drop as
select runlane_test.queued_run('agent-e', 'interactive', 'interactive') as run_id;
create temp table c on commit drop as
select c.fence from runlane.claim_runs('w1', array['interactive']) as c;
do $$ begin
    perform runlane.append_output((select run_id from r), (select fence from c), 'text', 'reply');
    perform runlane.finish_run((select run_id from r), (select fence from c), 'succeeded');
end $$;
create temp table before on commit drop as
select s.last_output_id from runlane.run_status((select run_id from r)) as s;

select throws_ok(
    $$select runlane.append_output((select run_id from r), (select fence from c), 'text', 'late')$$,
    'RL001', null, 'a succeeded run refuses another output'
);
select is(
    (select s.last_output_id from runlane.run_status((select run_id from r)) as s),
    (select last_output_id from before),
    'its last_output_id is unchanged'
);
select is(
    (select count(*) from runlane.claim_runs('w2', array['interactive'])), 0::bigint,
    'a finished run is never claimed again'
);

-- failed: attempts spent
create temp table f on commit drop as
select runlane_test.queued_run('agent-e', 'interactive', 'interactive') as run_id;
update runlane.runs set max_attempts = 1 where run_id = (select run_id from f);
create temp table cf on commit drop as
select c.fence from runlane.claim_runs('w1', array['interactive']) as c;
select is(
    runlane.retry_run((select run_id from f), (select fence from cf), 'boom', interval '0'),
    'failed', 'the last attempt fails the run'
);
select throws_ok(
    $$select runlane.append_output((select run_id from f), (select fence from cf), 'text', 'late')$$,
    'RL001', null, 'a failed run refuses another output'
);

-- canceled while running
create temp table x on commit drop as
select runlane_test.queued_run('agent-e', 'interactive', 'interactive') as run_id;
create temp table cx on commit drop as
select c.fence from runlane.claim_runs('w1', array['interactive']) as c;
do $$ begin
    perform runlane.cancel_run((select run_id from x));
    perform runlane.finish_run((select run_id from x), (select fence from cx), 'succeeded');
end $$;
select is(
    (select s.state from runlane.run_status((select run_id from x)) as s), 'canceled',
    'the stopped run is canceled'
);
select throws_ok(
    $$select runlane.append_output((select run_id from x), (select fence from cx), 'text', 'late')$$,
    'RL001', null, 'a canceled run refuses another output'
);

select * from finish();
rollback;
