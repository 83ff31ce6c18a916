-- weekly_spend: per owner, the week starting Monday 00:00 in the owner's zone (their
-- own, else the organization's), summed from the charges made in it (runlane_test.spent
-- charges its run when it was created), in two zones across DST weeks, and in a zone
-- whose week does not start on a quarter hour (the ledger's partial quarters).
begin;
select plan(11);

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

-- Monrovia in 1970 (UTC-00:44:30): the week of Monday 1970-06-08 00:00 runs from
-- 00:44:30Z to 1970-06-15 00:44:30Z, so its first and last quarter hours are partial.
do $$ begin perform runlane_test.scheduled_agent('agent-mon', '', 'Africa/Monrovia', 'UTC', 'org-w3'); end $$;
do $$ begin perform runlane_test.spent('agent-mon', 1, '1970-06-08 00:44:29+00'); end $$;
do $$ begin perform runlane_test.spent('agent-mon', 2, '1970-06-08 00:44:30+00'); end $$;
do $$ begin perform runlane_test.spent('agent-mon', 4, '1970-06-08 00:50+00'); end $$;
do $$ begin perform runlane_test.spent('agent-mon', 64, '1970-06-15 00:29:59+00'); end $$;
do $$ begin perform runlane_test.spent('agent-mon', 32, '1970-06-15 00:40+00'); end $$;
do $$ begin perform runlane_test.spent('agent-mon', 8, '1970-06-15 00:44:29+00'); end $$;
do $$ begin perform runlane_test.spent('agent-mon', 16, '1970-06-15 00:44:30+00'); end $$;

select is(
    runlane.weekly_spend('owner-of-agent-mon', '1970-06-10 12:00+00'), 110::numeric,
    'Monrovia 1970: charges in the partial first and last quarter hours count exactly'
);
select is(
    runlane.weekly_spend('owner-of-agent-mon', '1970-06-08 00:44:29+00'), 1::numeric,
    'Monrovia 1970: a second before Monday 00:00 is the previous week, though in the same quarter hour'
);
select is(
    runlane.weekly_spend('owner-of-agent-mon', '1970-06-15 00:44:30+00'), 16::numeric,
    'Monrovia 1970: Monday 00:00 starts the next week in the middle of a quarter hour'
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
