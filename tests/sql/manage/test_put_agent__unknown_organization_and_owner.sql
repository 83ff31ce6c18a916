-- put_agent answers RL008 for an unknown organization, an owner who is not a user of the
-- agent's organization (at creation and when the owner changes), an unknown owner, and an
-- org_id other than the agent's own (an agent never moves).
begin;
select plan(6);

do $$ begin
    perform runlane.put_org('org-o'); perform runlane.put_user('owner-o', 'org-o');
    perform runlane.put_org('org-z'); perform runlane.put_user('owner-z', 'org-z');
    perform runlane.put_agent('agent-o', '{"org_id": "org-o", "owner_id": "owner-o"}');
end $$;

select throws_ok(
    $$select runlane.put_agent('agent-1', '{"org_id": "org-nowhere", "owner_id": "owner-o"}')$$,
    'RL008', 'unknown organization ''org-nowhere''', 'an unknown organization'
);
select throws_ok(
    $$select runlane.put_agent('agent-1', '{"org_id": "org-o", "owner_id": "owner-z"}')$$,
    'RL008', 'unknown user ''owner-z'' in organization ''org-o''',
    'the owner belongs to the agent''s organization (create)'
);
select throws_ok(
    $$select runlane.put_agent('agent-o', '{"owner_id": "owner-z"}')$$,
    'RL008', 'unknown user ''owner-z'' in organization ''org-o''',
    'the owner belongs to the agent''s organization (patch)'
);
select throws_ok(
    $$select runlane.put_agent('agent-o', '{"owner_id": "owner-nobody"}')$$,
    'RL008', null, 'an unknown owner'
);
select throws_ok(
    $$select runlane.put_agent('agent-o', '{"org_id": "org-z", "owner_id": "owner-z"}')$$,
    '23505', 'agent id ''agent-o'' is taken',
    'an agent never moves to another organization: its id is taken there (and nothing more is said)'
);
select is(
    (
        select row(a.org_id, a.owner_id)::text || (select count(*) from runlane.agents)
        from runlane.agents as a where a.agent_id = 'agent-o'
    ),
    '(org-o,owner-o)1', 'nothing was written'
);

select * from finish();
rollback;
