-- finish_run closes an owned run with its outcome: reason derived from p_error, last
-- error kept, lease cleared, run.finished journaled with codes only, timing row returned.
begin;
select plan(18);

do $$
declare
    v_agent text;
begin
    foreach v_agent in array array[
        'agent-ok', 'agent-cap', 'agent-err', 'agent-nul', 'agent-stop', 'agent-cxl', 'agent-note'
    ] loop
        perform runlane_test.agent(v_agent, 'org-fin', 'computer-' || v_agent);
        perform runlane_test.queued_run(v_agent, 'background', 'manual');
        perform runlane_test.claimed_on_computer(runlane_test.last_run(v_agent), 'worker-1');
    end loop;
end
$$;

select is(
    runlane.finish_run(runlane_test.last_run('agent-ok'), 1, 'succeeded') ->> 'event',
    'run.finished',
    'finish_run returns the run.finished timing row'
);
select results_eq(
    $$select r.state, r.reason, r.last_error, r.lease_owner, r.lease_expires_at
      from runlane.runs as r where r.run_id = runlane_test.last_run('agent-ok')$$,
    $$values ('succeeded'::text, null::text, null::text, null::text, null::timestamptz)$$,
    'a succeeded run has no reason or error, and its lease is cleared'
);
select isnt(
    (select r.finished_at from runlane.runs as r where r.run_id = runlane_test.last_run('agent-ok')),
    null,
    'finished_at is stamped'
);
select is(
    (
        select e.detail from runlane.run_events as e
        where e.run_id = runlane_test.last_run('agent-ok') and e.event = 'run.finished'
    ),
    '{"outcome": "succeeded", "reason": null}'::jsonb,
    'run.finished is journaled with outcome and reason only'
);
select lives_ok(
    format('select runlane.finish_run(%s, 1, ''failed'', ''iteration_cap'')', runlane_test.last_run('agent-cap')),
    'a run failing at the iteration cap finishes'
);
select results_eq(
    $$select r.state, r.reason, r.last_error from runlane.runs as r
      where r.run_id = runlane_test.last_run('agent-cap')$$,
    $$values ('failed'::text, 'iteration_cap'::text, 'iteration_cap'::text)$$,
    'an error that is a reason code becomes the reason'
);

select lives_ok(
    format(
        'select runlane.finish_run(%s, 1, ''failed'', ''Model API answered 502 Bad Gateway'')',
        runlane_test.last_run('agent-err')
    ),
    'a run failing with an error message finishes'
);
select results_eq(
    $$select r.state, r.reason, r.last_error from runlane.runs as r
      where r.run_id = runlane_test.last_run('agent-err')$$,
    $$values ('failed'::text, 'error'::text, 'Model API answered 502 Bad Gateway'::text)$$,
    'a failed run with free-text error has reason error and keeps the text in last_error'
);
select is(
    (
        select e.detail from runlane.run_events as e
        where e.run_id = runlane_test.last_run('agent-err') and e.event = 'run.finished'
    ),
    '{"outcome": "failed", "reason": "error"}'::jsonb,
    'the journal never carries the error text'
);

select lives_ok(
    format('select runlane.finish_run(%s, 1, ''failed'')', runlane_test.last_run('agent-nul')),
    'a run failing without an error finishes'
);
select results_eq(
    $$select r.state, r.reason, r.last_error from runlane.runs as r
      where r.run_id = runlane_test.last_run('agent-nul')$$,
    $$values ('failed'::text, 'error'::text, null::text)$$,
    'a failed run without an error has reason error'
);

select lives_ok(
    format('select runlane.finish_run(%s, 1, ''canceled'', ''shutdown'')', runlane_test.last_run('agent-stop')),
    'a run canceled at shutdown finishes'
);
select results_eq(
    $$select r.state, r.reason, r.last_error from runlane.runs as r
      where r.run_id = runlane_test.last_run('agent-stop')$$,
    $$values ('canceled'::text, 'shutdown'::text, 'shutdown'::text)$$,
    'a canceled run with a reason code keeps it as reason'
);

select lives_ok(
    format('select runlane.finish_run(%s, 1, ''canceled'', ''User pressed stop'')', runlane_test.last_run('agent-cxl')),
    'a run canceled with a free-text note finishes'
);
select results_eq(
    $$select r.state, r.reason, r.last_error from runlane.runs as r
      where r.run_id = runlane_test.last_run('agent-cxl')$$,
    $$values ('canceled'::text, null::text, 'User pressed stop'::text)$$,
    'a canceled run with free text has no reason'
);

select lives_ok(
    format('select runlane.finish_run(%s, 1, ''succeeded'', ''Done, with a note'')', runlane_test.last_run('agent-note')),
    'a run succeeding with a free-text note finishes'
);
select results_eq(
    $$select r.state, r.reason from runlane.runs as r
      where r.run_id = runlane_test.last_run('agent-note')$$,
    $$values ('succeeded'::text, null::text)$$,
    'a succeeded run with free text has no reason'
);

select is(
    (select count(*) from runlane.runs as r where r.org_id = 'org-fin' and r.state = 'running'),
    0::bigint,
    'every finished run left the running state'
);

select * from finish();
rollback;
