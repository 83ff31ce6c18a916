-- submit_message finds the thread's unfinished run by the run id the thread's row records,
-- whatever the statistics were when the session planned it: a session whose first
-- messages went to an empty queue (its plans cached then) must not, 500 queued chat
-- runs later, walk the interactive queue to find one thread's run.
begin;
select plan(4);

do $$
begin
    perform runlane_test.org('org-a', 1000);
    perform runlane_test.agent('a-1', 'org-a');
end
$$;

-- The session's first messages, on an empty queue: past PL/pgSQL's custom-plan phase.
select is(
    (select count(*) from generate_series(1, 8) as g,
        lateral runlane.submit_message('a-1', 'first-' || g, 'hi') as s
    where s.disposition = 'created'),
    8::bigint,
    'eight messages create eight runs on an empty queue'
);

create temp table queued on commit drop as
select
    s.run_id,
    't-' || g as thread_id
from generate_series(1, 500) as g,
    lateral runlane.submit_message('a-1', 't-' || g, 'hello') as s;

create temp table before_message on commit drop as
select
    pg_stat_get_xact_tuples_returned('runlane.runs_unfinished_lane_idx'::regclass)
        as lane_entries,
    pg_stat_get_xact_numscans('runlane.runs_unfinished_thread_idx'::regclass) as thread_scans,
    pg_stat_get_xact_numscans('runlane.runs_pkey'::regclass) as key_scans;

create temp table steer on commit drop as
select * from runlane.submit_message('a-1', 't-400', 'more');

select results_eq(
    'select disposition, run_id from steer',
    $$select 'steering'::text, q.run_id from queued as q where q.thread_id = 't-400'$$,
    'a message to a thread with a queued run joins that run'
);

select ok(
    pg_stat_get_xact_tuples_returned('runlane.runs_unfinished_lane_idx'::regclass)
    - (select b.lane_entries from before_message as b) < 100
    and pg_stat_get_xact_numscans('runlane.runs_unfinished_thread_idx'::regclass)
    = (select b.thread_scans from before_message as b),
    'the interactive queue is not searched for the thread''s run'
);

select ok(
    pg_stat_get_xact_numscans('runlane.runs_pkey'::regclass)
    > (select b.key_scans from before_message as b),
    'the thread''s run is read by its key'
);

select * from finish();
rollback;
