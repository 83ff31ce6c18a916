-- A keyed claim taken from a backlog (the fair path) records its receipt from the runs and
-- fences in hand: a resend with the same key returns the same runs, in the same order,
-- under the fences the claim gave them (runs claimed before carry higher fences).
begin;
select plan(3);

do $$
begin
    perform runlane_test.org('org-r', 1000);
    perform runlane_test.agent('r-1', 'org-r');
end
$$;

insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model, fence)
select
    'org-r' as org_id,
    'r-1' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    't-' || g as thread_id,
    'x' as prompt,
    'noop' as model,
    g % 4 as fence
from generate_series(1, 30) as g;

create temp table first_claim on commit drop as
select
    c.run_id,
    c.fence,
    c.attempt,
    row_number() over () as position
from runlane.claim_runs(
    'worker-r', array['interactive'], 10, interval '60 seconds',
    '00000000-0000-0000-0000-0000000000b1'
) as c;

create temp table resent on commit drop as
select
    c.run_id,
    c.fence,
    c.attempt,
    row_number() over () as position
from runlane.claim_runs(
    'worker-r', array['interactive'], 10, interval '60 seconds',
    '00000000-0000-0000-0000-0000000000b1'
) as c;

select is(
    (select count(*) from first_claim),
    10::bigint,
    'the claim takes a page of 10 from the backlog of 30'
);

select results_eq(
    'select run_id, fence, attempt, position from resent order by position',
    'select run_id, fence, attempt, position from first_claim order by position',
    'the resend returns the same runs under the same fences, in the same order'
);

select ok(
    (
        select bool_and(f.fence = r.fence and r.fence = (r.run_id - (select min(run_id) from runlane.runs where org_id = 'org-r') + 1) % 4 + 1)
        from first_claim as f
        inner join runlane.runs as r on f.run_id = r.run_id
    ),
    'each claimed run''s fence is its fence before the claim + 1'
);

select * from finish();
rollback;
