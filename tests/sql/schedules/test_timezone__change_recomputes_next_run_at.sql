-- A calendar schedule resolves in its owner's zone, else the organization's; changing
-- the relevant zone recomputes next_run_at, and an irrelevant change does not.
begin;
select plan(6);

do $$ begin perform runlane_test.scheduled_agent('agent-own', 'daily at 09:00', 'Asia/Kathmandu', 'Europe/Berlin', 'org-z'); end $$;
do $$ begin perform runlane_test.scheduled_agent('agent-org', 'daily at 09:00', null, 'Europe/Berlin', 'org-z'); end $$;
do $$ begin perform runlane_test.scheduled_agent('agent-int', 'every 5 hours', null, 'Europe/Berlin', 'org-z'); end $$;

select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-own'),
    runlane.next_slot('daily at 09:00', 'Asia/Kathmandu', now()),
    'a calendar slot resolves in the owner''s zone'
);
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-org'),
    runlane.next_slot('daily at 09:00', 'Europe/Berlin', now()),
    'without an owner zone the slot resolves in the organization''s zone'
);

update runlane.users set timezone = 'America/New_York' where user_id = 'owner-of-agent-own';
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-own'),
    runlane.next_slot('daily at 09:00', 'America/New_York', now()),
    'changing the owner''s zone recomputes next_run_at'
);

do $$ begin perform runlane_test.due('agent-int', '2026-01-01 00:00+00'); end $$;
update runlane.platform_settings set timezone = 'Australia/Lord_Howe' where org_id = 'org-z';
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-org'),
    runlane.next_slot('daily at 09:00', 'Australia/Lord_Howe', now()),
    'changing the organization''s zone recomputes agents that use it'
);
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-own'),
    runlane.next_slot('daily at 09:00', 'America/New_York', now()),
    'an owner with their own zone is unaffected by the organization''s zone'
);
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-int'),
    '2026-01-01 00:00+00'::timestamptz,
    'an interval schedule does not depend on a zone and keeps its pending slot'
);

select * from finish();
rollback;
