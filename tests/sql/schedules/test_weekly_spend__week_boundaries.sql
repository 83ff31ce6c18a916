-- weekly_spend: per owner, the week starting Monday 00:00 in the owner's zone (their
-- own, else the organization's), summed from runs.cost, in two zones across DST weeks.
begin;
select plan(8);

-- Berlin owner (own zone): the week of Monday 2026-03-23 00:00 CET = 2026-03-22 23:00Z
-- ends at Monday 2026-03-30 00:00 CEST = 2026-03-29 22:00Z (a 167-hour week).
do $$ begin perform runlane_test.scheduled_agent('agent-ber', '', 'Europe/Berlin', 'UTC', 'org-w1'); end $$;
do $$ begin perform runlane_test.spent('agent-ber', 5, '2026-03-22 22:59:59+00'); end $$;
do $$ begin perform runlane_test.spent('agent-ber', 7, '2026-03-22 23:00+00'); end $$;
do $$ begin perform runlane_test.spent('agent-ber', 11, '2026-03-29 21:59:59+00'); end $$;
do $$ begin perform runlane_test.spent('agent-ber', 13, '2026-03-29 22:00+00'); end $$;

select is(
    runlane.weekly_spend('owner-of-agent-ber', '2026-03-29 21:59:59+00'), 18::numeric,
    'Berlin: the week runs from Monday 00:00 CET to Monday 00:00 CEST'
);
select is(
    runlane.weekly_spend('owner-of-agent-ber', '2026-03-29 22:00+00'), 13::numeric,
    'Berlin: Monday 00:00 CEST starts a new week'
);
select is(
    runlane.weekly_spend('owner-of-agent-ber', '2026-03-22 22:59:59+00'), 5::numeric,
    'Berlin: Sunday 23:59:59 belongs to the previous week'
);

-- New York owner (the organization's zone): the week of Monday 2026-10-26 00:00 EDT =
-- 04:00Z ends at Monday 2026-11-02 00:00 EST = 05:00Z (a 169-hour week).
do $$ begin perform runlane_test.scheduled_agent('agent-ny', '', null, 'America/New_York', 'org-w2'); end $$;
do $$ begin perform runlane_test.scheduled_agent('agent-ny2', '', null, 'America/New_York', 'org-w2'); end $$;
update runlane.agents set owner_id = 'owner-of-agent-ny' where agent_id = 'agent-ny2';
do $$ begin perform runlane_test.spent('agent-ny', 2, '2026-10-26 03:59:59+00'); end $$;
do $$ begin perform runlane_test.spent('agent-ny', 3, '2026-10-26 04:00+00'); end $$;
do $$ begin perform runlane_test.spent('agent-ny2', 4, '2026-11-02 04:59:59+00'); end $$;
do $$ begin perform runlane_test.spent('agent-ny', 6, '2026-11-02 05:00+00'); end $$;

select is(
    runlane.weekly_spend('owner-of-agent-ny', '2026-11-01 12:00+00'), 7::numeric,
    'New York (organization zone): the week spans the fall-back Sunday, across the owner''s agents'
);
select is(
    runlane.weekly_spend('owner-of-agent-ny', '2026-11-02 05:00+00'), 6::numeric,
    'New York: Monday 00:00 EST starts a new week'
);
select is(
    runlane.weekly_spend('owner-of-agent-ber', '2026-11-01 12:00+00'), 0::numeric,
    'a week without runs costs nothing, and other owners'' runs do not count'
);

select throws_ok(
    $$select runlane.weekly_spend('nobody', now())$$,
    '22023', null,
    'an unknown owner is refused'
);
select throws_ok(
    $$select runlane.weekly_spend(null, now())$$,
    '22004', null,
    'a missing owner is refused'
);

select * from finish();
rollback;
