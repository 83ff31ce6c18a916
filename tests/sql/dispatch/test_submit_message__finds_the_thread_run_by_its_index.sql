-- submit_message finds the thread's unfinished run through runs_unfinished_thread_idx
-- whatever the statistics were when the session planned it: a session whose first
-- messages went to an empty queue (its plans cached then) must not, 500 queued chat
-- runs later, filter every unfinished interactive run to find one thread's (through the
-- lane-keyed runs_unfinished_lane_idx each message would cost more than the one before).
begin;
select plan(3);

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

insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model)
select
    'org-a' as org_id,
    'a-1' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    't-' || g as thread_id,
    'x' as prompt,
    'noop' as model
from generate_series(1, 500) as g;

create temp table before_message on commit drop as
select
    pg_stat_get_xact_tuples_returned('runlane.runs_unfinished_lane_idx'::regclass)
        as lane_entries,
    pg_stat_get_xact_numscans('runlane.runs_unfinished_thread_idx'::regclass) as thread_scans;

select is(
    (select s.disposition from runlane.submit_message('a-1', 't-400', 'more') as s),
    'steering',
    'a message to a thread with a queued run joins it'
);

select ok(
    pg_stat_get_xact_tuples_returned('runlane.runs_unfinished_lane_idx'::regclass)
    - (select b.lane_entries from before_message as b) < 100
    and pg_stat_get_xact_numscans('runlane.runs_unfinished_thread_idx'::regclass)
    > (select b.thread_scans from before_message as b),
    'the thread''s run is probed through runs_unfinished_thread_idx, not among 508'
);

select * from finish();
rollback;
