-- An organization never runs more background runs than agent_max_concurrency;
-- interactive runs never count against it and other organizations are unaffected.
begin;
select plan(6);

do $$ begin perform runlane_test.org('org-capped', 2); end $$;
do $$ begin perform runlane_test.org('org-free', 10); end $$;
select runlane_test.agent('capped-' || i, 'org-capped') from generate_series(1, 5) as i;
select runlane_test.agent('free-' || i, 'org-free') from generate_series(1, 3) as i;
do $$
begin
    perform runlane_test.queued_run('capped-' || i) from generate_series(1, 5) as i;
    perform runlane_test.queued_run('capped-1', 'interactive', 'interactive') from generate_series(1, 3);
    perform runlane_test.queued_run('free-' || i) from generate_series(1, 3) as i;
end
$$;

create temp table claimed on commit drop as
select * from runlane.claim_runs('worker-1', array['interactive', 'background'], 100);

select is(
    (select count(*) from claimed where org_id = 'org-capped' and lane = 'background'),
    2::bigint,
    'a capped organization gets only as many background runs as its cap'
);
select is(
    (select count(*) from claimed where org_id = 'org-capped' and lane = 'interactive'),
    3::bigint,
    'interactive runs of a capped organization are not held back by the cap'
);
select is(
    (select count(*) from claimed where org_id = 'org-free'),
    3::bigint,
    'another organization is unaffected'
);
select is(
    (select count(*) from runlane.claim_runs('worker-2', array['background'], 100)),
    0::bigint,
    'a second claimer gets nothing more for the capped organization'
);

update runlane.runs set state = 'succeeded', finished_at = now()
where run_id = (select min(run_id) from claimed where org_id = 'org-capped' and lane = 'background');

select is(
    (select count(*) from runlane.claim_runs('worker-2', array['background'], 100)),
    1::bigint,
    'a finished run frees exactly one slot'
);
select is(
    (select count(*) from runlane.runs where org_id = 'org-capped' and lane = 'background' and state = 'running'),
    2::bigint,
    'the organization is at its cap again, not above it'
);

select * from finish();
rollback;
