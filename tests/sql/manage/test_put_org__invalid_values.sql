-- put_org refuses unknown keys and wrong types (22023 naming the key and the accepted
-- ones), bad zones (RL007), out-of-range numbers and null or blank ids, writing nothing.
begin;
select plan(11);

select throws_ok(
    $$select runlane.put_org('org-x', '{"colour": "red"}')$$, '22023',
    'unknown key ''colour'' in the organization patch; accepted keys: '
    || 'agent_iteration_cap, agent_max_concurrency, agent_weekly_budget, timezone',
    'an unknown key is named with the accepted ones'
);
select throws_ok(
    $$select runlane.put_org('org-x', '{"agent_max_concurrency": "4"}')$$, '22023',
    'key ''agent_max_concurrency'' of the organization patch must be number, got string',
    'a string where a number belongs is refused, naming the key'
);
select throws_ok(
    $$select runlane.put_org('org-x', '{"timezone": null}')$$, '22023',
    'key ''timezone'' of the organization patch must be string, got null',
    'an organization always has a zone'
);
select throws_ok(
    $$select runlane.put_org('org-x', '{"agent_max_concurrency": 0}')$$, '22023', null,
    'a concurrency below 1 is refused'
);
select throws_ok(
    $$select runlane.put_org('org-x', '{"agent_iteration_cap": 2.5}')$$, '22023', null,
    'a fraction is refused'
);
select throws_ok(
    $$select runlane.put_org('org-x', '{"agent_weekly_budget": -1}')$$, '22023', null,
    'a negative budget is refused'
);
select throws_ok(
    $$select runlane.put_org('org-x', '{"agent_weekly_budget": 1e300}')$$, '22023', null,
    'a budget beyond any charge (over 1e12) is refused, as every amount of spend is'
);
select throws_ok(
    $$select runlane.put_org('org-x', '{"timezone": "Mars/Olympus"}')$$, 'RL007', null,
    'an unknown zone raises RL007'
);
select throws_ok($$select runlane.put_org('org-x', '[1]')$$, '22023', null, 'a patch is an object');
select throws_ok($$select runlane.put_org('  ', '{}')$$, '22023', null, 'a blank organization id');
select is(
    (select count(*) from runlane.platform_settings where org_id = 'org-x'), 0::bigint,
    'nothing was written'
);

select * from finish();
rollback;
