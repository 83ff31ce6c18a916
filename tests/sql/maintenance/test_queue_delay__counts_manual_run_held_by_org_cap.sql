-- queue_delay counts a "Run now" (manual, background lane) that a person is waiting for
-- while the organization's cap holds it back; scheduled and reaction work and a future
-- retry in the same queue never count.
begin;
select plan(5);

do $$
begin
    perform runlane_test.org('org-cap', 1);
    perform runlane_test.agent('agent-busy', 'org-cap');
    perform runlane_test.agent('agent-click', 'org-cap');
    perform runlane_test.agent('agent-timer', 'org-cap');
    perform runlane_test.agent('agent-react', 'org-cap');
    perform runlane_test.agent('agent-later', 'org-cap');
    -- the organization's one background slot is taken
    perform runlane_test.claimed(runlane_test.queued_run('agent-busy', 'background', 'manual'));
    perform runlane_test.queued_run('agent-click', 'background', 'manual');
    perform runlane_test.queued_run('agent-timer', 'background', 'scheduled');
    perform runlane_test.queued_run('agent-react', 'background', 'reaction');
    perform runlane_test.queued_run('agent-later', 'background', 'retry', now() + interval '1 minute');
end $$;
update runlane.runs set created_at = now() - interval '5 minutes'
where agent_id = 'agent-click';
update runlane.runs set created_at = now() - interval '10 minutes'
where agent_id in ('agent-timer', 'agent-react', 'agent-later');

select is_empty(
    $$select run_id from runlane.claim_runs('worker-qd', array['background'], 10)$$,
    'the organization''s cap holds every queued background run back'
);

select is(
    (select count(*)::int from runlane.runs where agent_id = 'agent-click' and state = 'queued'),
    1,
    'the manual run the person clicked is still queued'
);

select results_eq(
    $$select delayed_runs, oldest_wait_ms from runlane.queue_delay('30 seconds', now())$$,
    $$values (1, 300000::bigint)$$,
    'the manual run held back by the cap counts, waiting since its creation 5 minutes ago'
);

update runlane.runs set created_at = now() - interval '20 seconds'
where agent_id = 'agent-click';
select results_eq(
    $$select delayed_runs, oldest_wait_ms from runlane.queue_delay('30 seconds', now())$$,
    $$values (0, null::bigint)$$,
    'scheduled and reaction work and a future retry never count, however old'
);

-- a test run in the background lane is interactive-class work too
do $$
begin
    perform runlane_test.agent('agent-test', 'org-cap');
    perform runlane_test.queued_run('agent-test', 'background', 'test');
end $$;
update runlane.runs set created_at = now() - interval '45 seconds'
where agent_id = 'agent-test';
select results_eq(
    $$select delayed_runs, oldest_wait_ms from runlane.queue_delay('30 seconds', now())$$,
    $$values (1, 45000::bigint)$$,
    'a test run due for 45 s counts'
);

select * from finish();
rollback;
