-- put_org creates an organization with the defaults, patches only the keys given, and
-- JSON null on agent_weekly_budget means unlimited.
begin;
select plan(8);

select is(
    (
        select row(o.timezone, o.agent_max_concurrency, o.agent_iteration_cap, o.agent_weekly_budget)::text
        from runlane.put_org('org-m') as o
    ),
    '(UTC,4,20,)', 'a new organization gets the defaults'
);
select is(
    (
        select row(o.timezone, o.agent_max_concurrency, o.agent_weekly_budget)::text
        from runlane.put_org('org-m', '{"timezone": "Europe/Berlin", "agent_weekly_budget": 12.5}') as o
    ),
    '(Europe/Berlin,4,12.5)', 'the keys given are set and returned'
);
select is(
    (
        select row(o.timezone, o.agent_max_concurrency, o.agent_iteration_cap, o.agent_weekly_budget)::text
        from runlane.put_org('org-m', '{"agent_max_concurrency": 2}') as o
    ),
    '(Europe/Berlin,2,20,12.5)', 'absent keys keep their values'
);
select is(
    (
        select row(o.timezone, o.agent_max_concurrency, o.agent_iteration_cap, o.agent_weekly_budget)::text
        from runlane.put_org('org-m') as o
    ),
    '(Europe/Berlin,2,20,12.5)', 'an empty patch changes nothing'
);
select is(
    (runlane.put_org('org-m', '{"agent_weekly_budget": null}')).agent_weekly_budget, null,
    'JSON null makes the weekly budget unlimited'
);
select is(
    (
        select row(s.timezone, s.agent_max_concurrency, s.agent_iteration_cap, s.agent_weekly_budget)::text
        from runlane.platform_settings as s where s.org_id = 'org-m'
    ),
    '(Europe/Berlin,2,20,)', 'the stored row is the returned one'
);
select is((select count(*) from runlane.platform_settings where org_id = 'org-m'), 1::bigint, 'one row');
select is(
    (runlane.put_org('org-m', '{"agent_iteration_cap": 7}')).agent_iteration_cap, 7, 'iteration cap set'
);

select * from finish();
rollback;
