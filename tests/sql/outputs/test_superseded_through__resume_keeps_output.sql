-- superseded_through: an attempt claimed with a checkpoint resumes from it and continues
-- the earlier output, which stays (after a failure as after a release); RL008 for an
-- unknown run, 22004 for a null id.
begin;
select plan(6);

do $$ begin perform runlane_test.agent('agent-k', 'org-k'); end $$;
create temp table r on commit drop as
select runlane_test.queued_run('agent-k', 'interactive', 'interactive') as run_id;
create temp table c1 on commit drop as
select c.fence from runlane.claim_runs('w1', array['interactive']) as c;
do $$ begin
    perform runlane.append_output((select run_id from r), (select fence from c1), 'text', 'chunk 0');
    perform runlane.save_checkpoint((select run_id from r), (select fence from c1), '{"n": 1}');
    perform runlane.release_run((select run_id from r), (select fence from c1), null, 'shutdown');
end $$;

create temp table c2 on commit drop as
select
    c.fence,
    c.attempt,
    c.checkpoint
from runlane.claim_runs('w2', array['interactive']) as c;
select results_eq(
    $$select attempt, checkpoint from c2$$,
    $$values (2, '{"n": 1}'::jsonb)$$,
    'attempt 2 resumes from the checkpoint'
);
select is(
    runlane.superseded_through((select run_id from r)), 0::bigint,
    'a resumed attempt supersedes nothing'
);

do $$ begin
    perform runlane.append_output((select run_id from r), (select fence from c2), 'text', 'chunk 1');
    perform runlane.retry_run((select run_id from r), (select fence from c2), 'boom', interval '0');
end $$;
do $$ begin perform runlane.claim_runs('w3', array['interactive']); end $$;
select is(
    runlane.superseded_through((select run_id from r)), 0::bigint,
    'an attempt resumed after a failure supersedes nothing either'
);
select is(
    (
        select count(*) from runlane.run_events as e
        where
            e.run_id = (select run_id from r) and e.event = 'run.claimed'
            and e.detail ->> 'resumed' = 'true'
    ),
    2::bigint,
    'both resuming claims journal resumed = true'
);

select throws_ok(
    $$select runlane.superseded_through(-7)$$, 'RL008', 'unknown run -7',
    'an unknown run is RL008'
);
select throws_ok(
    $$select runlane.superseded_through(null)$$, '22004', 'run id is required',
    'a null id is 22004'
);

select * from finish();
rollback;
