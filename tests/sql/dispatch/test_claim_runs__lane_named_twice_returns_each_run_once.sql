-- A lane named twice is one lane: claim_runs returns each run once, with one fence, also
-- on the fair path's loose index scan (one organization owning a queue longer than the
-- claim window), which must not read the lane once per time it is named.
begin;
select plan(4);

do $$
begin
    perform runlane_test.agent('agent-one', 'org-twice');
    for i in 1..60 loop
        perform runlane_test.queued_run('agent-one', 'interactive', 'interactive');
    end loop;
end
$$;

create temp table twice on commit drop as
select * from runlane.claim_runs('worker-1', array['interactive', 'interactive'], 2);
select is((select count(*) from twice), 2::bigint, 'two rows for a claim of two');
select is((select count(distinct run_id) from twice), 2::bigint, 'two different runs');
select is(
    (select count(*) from runlane.runs where agent_id = 'agent-one' and state = 'running'),
    2::bigint,
    'two runs are running'
);
select is(
    (select max(fence) from runlane.runs where agent_id = 'agent-one'),
    1::bigint,
    'each claimed once (fence 1)'
);

select * from finish();
rollback;
