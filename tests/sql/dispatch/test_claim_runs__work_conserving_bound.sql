-- The per-worker organization bound, work-conserving (runlane.max_per_org_mode =
-- work_conserving, the worker's): it binds only while an organization within its room
-- waits. Those runs come first; the page is filled past the bound; a lone organization's
-- pages are full. A mode other than strict or work_conserving is refused.
begin;
select plan(5);

-- w1 runs 5 of org-a's runs (its bound of 5 is reached); org-a has 30 more queued,
-- org-b 3.
do $$
begin
    perform runlane_test.org('org-a', 1000);
    perform runlane_test.agent('a-1', 'org-a');
    perform runlane_test.org('org-b', 1000);
    perform runlane_test.agent('b-1', 'org-b');
    perform runlane_test.running_chat_runs('a-1', 'w1', 5);
    perform runlane_test.chat_backlog('a-1', 30);
    perform runlane_test.chat_backlog('b-1', 3, 'b-thread-');
    perform set_config('runlane.max_per_org', '5', true);  -- this transaction's claims
    perform set_config('runlane.max_per_org_mode', 'work_conserving', true);
end
$$;

create temp table first_page on commit drop as
select
    c.org_id,
    row_number() over () as position
from runlane.claim_runs('w1', array['interactive'], 10) as c;

select is(
    (select array_agg(f.org_id order by f.position) from first_page as f where f.position <= 3),
    array['org-b', 'org-b', 'org-b'],
    'org-b, within its room, comes first'
);

select is(
    (select count(*) from first_page as f where f.org_id = 'org-a'),
    7::bigint,
    'the rest of the page is org-a''s, past its bound'
);

select is(
    (
        select count(*) from runlane.claim_runs('w1', array['interactive'], 10) as c
        where c.org_id = 'org-a'
    ),
    10::bigint,
    'org-a alone: a full page past the bound'
);

select is(
    (select count(*) from runlane.claim_runs('w1', array['interactive'], 20)),
    13::bigint,
    'the last 13, fitting in the page (the idle statement): all of them'
);

do $$
begin
    perform set_config('runlane.max_per_org_mode', 'loose', true);
end
$$;

select throws_ok(
    $$select * from runlane.claim_runs('w1', array['interactive'], 10)$$,
    '22023',
    'runlane.max_per_org_mode must be strict or work_conserving, got ''loose''',
    'a mode that is neither is refused'
);

select * from finish();
rollback;
