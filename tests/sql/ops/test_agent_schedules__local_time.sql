-- agent_schedules: the next run as an instant and as wall time in the agent's own zone.
begin;
select plan(3);

do $$ begin perform runlane_test.org('org-z', 4, 'Asia/Tokyo'); end $$;
do $$ begin perform runlane_test.owner('owner-berlin', 'org-z', 'Europe/Berlin'); end $$;
do $$ begin perform runlane_test.owner('owner-none', 'org-z', null); end $$;
do $$ begin perform runlane_test.agent('agent-berlin', 'org-z', null, 'owner-berlin'); end $$;
do $$ begin perform runlane_test.agent('agent-tokyo', 'org-z', null, 'owner-none'); end $$;
update runlane.agents set schedule = 'daily at 09:00' where agent_id in ('agent-berlin', 'agent-tokyo');
update runlane.agents set enabled = false where agent_id = 'agent-tokyo';

select is(
    (select row(timezone, status, next_run_local)::text from runlane.agent_schedules() where agent_id = 'agent-berlin'),
    row('Europe/Berlin', 'scheduled', to_char(
        (select next_run_at from runlane.agents where agent_id = 'agent-berlin') at time zone 'Europe/Berlin',
        'YYYY-MM-DD HH24:MI'
    ))::text,
    'the next run shows in the owner''s timezone'
);
select alike(
    (select next_run_local from runlane.agent_schedules() where agent_id = 'agent-berlin'),
    '% 09:00',
    'a daily 09:00 schedule reads 09:00 in its own zone'
);
select is(
    (select row(timezone, status, next_run_local)::text from runlane.agent_schedules() where agent_id = 'agent-tokyo'),
    row('Asia/Tokyo', 'off', null)::text,
    'an owner without a zone falls back to the organization''s; a switched-off agent has no next run'
);

select * from finish();
rollback;
