-- put_agent creates an agent with the defaults and the keys given, and a later patch
-- changes only the keys it names.
begin;
select plan(9);

do $$ begin perform runlane.put_org('org-p'); perform runlane.put_user('owner-p', 'org-p'); end $$;

select is(
    (
        select row(a.org_id, a.owner_id, a.enabled, a.admin_locked, a.model, a.prompt, a.schedule)::text
        from runlane.put_agent('agent-p', '{"org_id": "org-p", "owner_id": "owner-p"}') as a
    ),
    '(org-p,owner-p,t,f,,"","")', 'a new agent gets the column defaults'
);
select is(
    (
        select row(a.model, a.prompt, a.thread_id, a.computer_id, a.schedule)::text
        from runlane.put_agent('agent-p', '{"model": "m-1", "prompt": "Sum up", "thread_id": "t-9",
                                         "computer_id": "pc-1", "schedule": "Every 2 Hours"}') as a
    ),
    '(m-1,"Sum up",t-9,pc-1,"every 2 hours")', 'the keys given are set, the schedule canonical'
);
select is(
    (
        select row(a.model, a.prompt, a.thread_id, a.computer_id, a.schedule, a.enabled)::text
        from runlane.put_agent('agent-p', '{}') as a
    ),
    '(m-1,"Sum up",t-9,pc-1,"every 2 hours",t)', 'an empty patch changes nothing'
);
select is(
    (
        select row(a.model, a.prompt, a.thread_id, a.computer_id, a.schedule)::text
        from runlane.put_agent('agent-p', '{"prompt": "Other", "computer_id": null}') as a
    ),
    '(m-1,Other,t-9,,"every 2 hours")', 'absent keys keep their values; null clears a nullable one'
);
select is(
    (select row(a.prompt, a.computer_id)::text from runlane.agents as a where a.agent_id = 'agent-p'),
    '(Other,)', 'the stored row is the returned one'
);
select is(
    (runlane.put_agent('agent-p', '{"org_id": "org-p"}')).org_id, 'org-p',
    'naming the agent''s own organization is fine'
);
do $$ begin perform runlane.put_user('owner-q', 'org-p'); end $$;
select is(
    (runlane.put_agent('agent-p', '{"owner_id": "owner-q"}')).owner_id, 'owner-q',
    'the owner can change within the organization'
);
select is(
    (runlane.put_agent('agent-w', '{"org_id": "org-p", "owner_id": "owner-p", "schedule": "weekly at 09:00"}')).schedule,
    'weekly on ' || lower(to_char(now() at time zone 'UTC', 'dy')) || ' at 09:00',
    'the trigger stores a weekly schedule on the day it is set'
);
select is((select count(*) from runlane.agents where org_id = 'org-p'), 2::bigint, 'two agents');

select * from finish();
rollback;
