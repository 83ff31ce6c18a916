-- An organization that reaches its cap within a claim leaves no hole in the page: the
-- claim locks other organizations' runs in the places of the runs over the cap (left
-- queued, untouched), in round-robin order, and the cap still holds. Before, a claim of
-- 20 on both lanes over 50 chat runs and an organization capped at one took 11.
begin;
select plan(9);

-- 500 background runs of org-storm (cap 1), queued; 50 chat runs of org-a.
do $$
begin
    perform runlane_test.background_storm(500);
    perform runlane_test.agent('chat-a', 'org-a');
    perform runlane_test.chat_backlog('chat-a', 50);
end
$$;

create temp table page on commit drop as
select c.*
from runlane.claim_runs(
    'w-both', array['interactive', 'background'], 20, interval '1 minute', gen_random_uuid(), true
) as c;

select is((select count(*) from page), 20::bigint, 'a claim of 20 on both lanes takes 20');
select is(
    (select count(*) from page where lane = 'background'),
    1::bigint,
    'one background run of the organization capped at one'
);
select is(
    (select count(*) from page where lane = 'interactive'),
    19::bigint,
    'the places of its runs over the cap go to the chat runs'
);
select is(
    (
        select count(*) from runlane.runs
        where org_id = 'org-storm' and state = 'running'
    ),
    1::bigint,
    'the capped organization runs one, its cap'
);
select is(
    (
        select count(*) from runlane.runs
        where org_id = 'org-storm' and state = 'queued' and attempts = 0 and fence = 0
    ),
    499::bigint,
    'its runs over the cap are left queued, untouched'
);

-- The background lane alone: org-b (cap 4) and org-c (cap 100), 30 queued runs each,
-- org-b's oldest first.
do $$
begin
    perform runlane_test.org('org-b', 4);
    perform runlane_test.org('org-c', 100);
    perform runlane_test.agent('b-' || i, 'org-b') from generate_series(1, 30) as i;
    perform runlane_test.agent('c-' || i, 'org-c') from generate_series(1, 30) as i;
    perform runlane_test.queued_run('b-' || i) from generate_series(1, 30) as i;
    perform runlane_test.queued_run('c-' || i) from generate_series(1, 30) as i;
end
$$;

create temp table background_page on commit drop as
select
    c.org_id,
    c.ordinality as place
from runlane.claim_runs(
    'w-bg', array['background'], 20, interval '1 minute', gen_random_uuid(), true
) with ordinality as c;

select is(
    (select count(*) from background_page),
    20::bigint,
    'a background claim of 20 over an organization capped at 4 takes 20'
);
select is(
    (select array_agg(org_id order by place) from background_page where place <= 10),
    array['org-b', 'org-c', 'org-b', 'org-c', 'org-b', 'org-c', 'org-b', 'org-c', 'org-c', 'org-c'],
    'round robin until org-b is at its cap, then org-c alone'
);
select is(
    (select count(*) from runlane.runs where org_id = 'org-b' and state = 'running'),
    4::bigint,
    'org-b runs its cap and no more'
);
select is(
    (
        select count(*) from
            runlane.claim_runs(
                'w-bg-2', array['background'], 20, interval '1 minute', gen_random_uuid(), true
            ) as c
        where c.org_id = 'org-b'
    ),
    0::bigint,
    'another claimer gets nothing more of org-b'
);

select * from finish();
rollback;
