-- put_agent refuses, writing nothing: unknown keys and wrong JSON types (22023 naming the
-- key and the accepted ones), a new agent without org_id or owner_id (22023), blank ids,
-- an invalid schedule (RL006).
begin;
select plan(9);

do $$ begin perform runlane.put_org('org-i'); perform runlane.put_user('owner-i', 'org-i'); end $$;
do $$ begin perform runlane.put_agent('agent-i', '{"org_id": "org-i", "owner_id": "owner-i", "model": "m"}'); end $$;

select throws_ok(
    $$select runlane.put_agent('agent-i', '{"enabled": "yes"}')$$, '22023',
    'key ''enabled'' of the agent patch must be boolean, got string',
    '"enabled": "yes" is refused, naming the key'
);
select throws_ok(
    $$select runlane.put_agent('agent-i', '{"next_run_at": "2030-01-01"}')$$, '22023',
    'unknown key ''next_run_at'' in the agent patch; accepted keys: admin_locked, computer_id, enabled, '
    || 'handler, model, org_id, owner_id, prompt, schedule, thread_id',
    'next_run_at is not written by callers: an unknown key, naming the accepted ones'
);
select throws_ok(
    $$select runlane.put_agent('agent-i', '{"prompt": null}')$$, '22023',
    'key ''prompt'' of the agent patch must be string, got null', 'a prompt is text'
);
select throws_ok(
    $$select runlane.put_agent('agent-i', '{"schedule": 5}')$$, '22023', null, 'a schedule is text'
);
select throws_ok(
    $$select runlane.put_agent('agent-new', '{"org_id": "org-i"}')$$, '22023',
    'a new agent needs the keys ''org_id'' and ''owner_id'' (agent ''agent-new'' does not exist)',
    'creating needs org_id and owner_id'
);
select throws_ok(
    $$select runlane.put_agent('agent-i', '{"thread_id": " "}')$$, '22023', null, 'a blank thread id'
);
select throws_ok(
    $$select runlane.put_agent('agent-i', '{"schedule": "*/5 * * * *"}')$$, 'RL006', null,
    'raw cron raises RL006'
);
select throws_ok($$select runlane.put_agent('agent-i', null)$$, '22004', null, 'a null patch');
select is(
    (select row(a.enabled, a.prompt, a.schedule, a.thread_id)::text from runlane.agents as a where a.agent_id = 'agent-i')
    || (select count(*) from runlane.agents)::text,
    '(t,"","",)1', 'nothing was written'
);

select * from finish();
rollback;
