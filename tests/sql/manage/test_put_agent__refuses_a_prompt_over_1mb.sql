-- A prompt is read into every run of its agent and sent to the model on each step: it has
-- the bound of a message body (1 MB). put_agent and create_run refuse a larger one with
-- 22023, writing nothing; exactly 1 MB is accepted.
begin;
select plan(6);

do $$ begin perform runlane.put_org('org-p'); perform runlane.put_user('owner-p', 'org-p'); end $$;
do $$ begin perform runlane.put_agent('agent-p', '{"org_id": "org-p", "owner_id": "owner-p", "model": "m", "prompt": "short"}'); end $$;

select throws_ok(
    format(
        $$select runlane.put_agent('agent-p', %L::jsonb)$$,
        jsonb_build_object('prompt', repeat('x', 1048577))::text
    ),
    '22023', 'a prompt is at most 1 MB (1048576 bytes), got 1048577 bytes',
    'a prompt one byte over 1 MB is refused'
);
select is(
    (select prompt from runlane.agents where agent_id = 'agent-p'), 'short',
    'and the agent keeps its prompt'
);
select throws_ok(
    format(
        $$select runlane.put_agent('agent-new', %L::jsonb)$$,
        jsonb_build_object(
            'org_id', 'org-p', 'owner_id', 'owner-p',
            'prompt', repeat('é', 524289)
        )::text
    ),
    '22023', 'a prompt is at most 1 MB (1048576 bytes), got 1048578 bytes',
    'bytes are counted, not characters, and a new agent is not created'
);
select is(
    (select count(*)::int from runlane.agents where agent_id = 'agent-new'), 0,
    'no agent was created'
);
select lives_ok(
    format(
        $$select runlane.put_agent('agent-p', %L::jsonb)$$,
        jsonb_build_object('prompt', repeat('x', 1048576))::text
    ),
    'exactly 1 MB is accepted'
);
select throws_ok(
    format($$select runlane.create_run('agent-p', 'manual', %L)$$, repeat('x', 1048577)),
    '22023', 'a prompt is at most 1 MB (1048576 bytes), got 1048577 bytes',
    'create_run refuses an oversized prompt before it writes a run'
);

select * from finish();
rollback;
