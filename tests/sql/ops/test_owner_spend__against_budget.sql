-- owner_spend: each agent owner's spend this week against the organization's budget.
begin;
select plan(3);

do $$ begin
    perform runlane_test.org('org-s');
    update runlane.platform_settings set agent_weekly_budget = 10 where org_id = 'org-s';
    perform runlane_test.owner('owner-s1', 'org-s');
    perform runlane_test.owner('owner-s2', 'org-s');
    perform runlane_test.owner('owner-idle', 'org-s');
    perform runlane_test.agent('agent-s1', 'org-s', p_owner_id => 'owner-s1');
    perform runlane_test.agent('agent-s1b', 'org-s', p_owner_id => 'owner-s1');
    perform runlane_test.agent('agent-s2', 'org-s', p_owner_id => 'owner-s2');
    perform runlane_test.agent('agent-u', 'org-unlimited', p_owner_id => 'owner-u');
    -- Wednesday 2026-03-04; the week started Monday 2026-03-02 00:00 UTC.
    perform runlane_test.spent('agent-s1', 6, '2026-03-03 10:00+00');
    perform runlane_test.spent('agent-s1b', 4, '2026-03-04 09:00+00');
    perform runlane_test.spent('agent-s2', 3, '2026-03-04 09:00+00');
    perform runlane_test.spent('agent-s2', 50, '2026-02-27 09:00+00');  -- the week before
    perform runlane_test.spent('agent-u', 1000, '2026-03-04 09:00+00');
end $$;

select is(
    (
        select array_agg(row(org_id, owner_id, agents, weekly_spend, weekly_budget, exhausted)::text)
        from runlane.owner_spend('2026-03-04 12:00+00')
        where org_id in ('org-s', 'org-unlimited')
    ),
    array[
        row('org-s', 'owner-s1', 2, 10::numeric, 10::numeric, true)::text,
        row('org-s', 'owner-s2', 1, 3::numeric, 10::numeric, false)::text,
        row('org-unlimited', 'owner-u', 1, 1000::numeric, null::numeric, false)::text
    ],
    'one row per agent owner: this week''s spend of all their agents against the budget; '
    || 'exhausted at the budget, never without one; an owner with no agent is not listed'
);
select throws_ok(
    $$select * from runlane.owner_spend(null)$$, '22004', null, 'a null instant is refused'
);
select throws_ok(
    $$select * from runlane.owner_spend('infinity')$$, '22023', null, 'an infinite instant is refused'
);

select * from finish();
rollback;
