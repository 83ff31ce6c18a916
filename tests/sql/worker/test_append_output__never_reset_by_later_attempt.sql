-- first_response_at is set once for the run's life: a later attempt (re-claim) keeps it.
begin;
select plan(7);

do $$ begin perform runlane_test.agent('agent-a'); end $$;
create temp table s on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'hi');
create temp table f1 on commit drop as
select runlane_test.claimed((select run_id from s)) as fence;
create temp table first_timing on commit drop as
select runlane.append_output((select run_id from s), (select fence from f1), 'text', 'first reply') as timing;
create temp table stamped on commit drop as
select first_response_at from runlane.runs where run_id = (select run_id from s);

select isnt((select first_response_at from stamped), null, 'the first attempt''s reply stamps the first response');
select is((select timing ->> 'event' from first_timing), 'run.first_response', 'and returns the timing row');

-- The lease was lost; the run is claimed again (a new attempt) and replies again.
create temp table f2 on commit drop as
select runlane_test.claimed((select run_id from s)) as fence;
select is(
    runlane.append_output((select run_id from s), (select fence from f2), 'text', 'second attempt reply'),
    null,
    'a reply of a later attempt returns no first-response row'
);
select is(
    (select first_response_at from runlane.runs where run_id = (select run_id from s)),
    (select first_response_at from stamped),
    'a later attempt never resets first_response_at'
);
select results_eq(
    $$select attempt from runlane.run_outputs where run_id = (select run_id from s) order by output_id$$,
    $$values (1), (2)$$,
    'each output records the attempt that wrote it'
);

-- A release and resume (back to queued, then claimed again) keeps it too.
update runlane.runs set state = 'queued', lease_owner = null, lease_expires_at = null
where run_id = (select run_id from s);
create temp table f3 on commit drop as
select runlane_test.claimed((select run_id from s)) as fence;
select is(
    runlane.append_output((select run_id from s), (select fence from f3), 'final', 'resumed reply'),
    null,
    'a resumed run''s reply returns no first-response row'
);
select is(
    (select first_response_at from runlane.runs where run_id = (select run_id from s)),
    (select first_response_at from stamped),
    'a resume never resets first_response_at'
);

select * from finish();
rollback;
