-- A claim with handlers takes only runs whose agent's handler it names, whatever is
-- queued of other handlers, and reads none of theirs; without handlers it takes any.
-- Fairness across organizations and the organizations' caps hold per handler: a cap
-- counts every running run of the organization, whatever its handler.
begin;
select plan(18);

do $$
begin
    perform runlane_test.org('org-a', 1);
    perform runlane_test.org('org-b', 1);
    perform runlane_test.agent('chat-a', 'org-a');
    perform runlane_test.agent('chat-b', 'org-b');
    perform runlane_test.agent('code-a', 'org-a');
    perform runlane_test.agent('code-a2', 'org-a');
    perform runlane_test.agent('research-a', 'org-a');
    update runlane.agents set handler = 'chat' where agent_id in ('chat-a', 'chat-b');
    update runlane.agents set handler = 'code' where agent_id in ('code-a', 'code-a2');
    update runlane.agents set handler = 'research' where agent_id = 'research-a';
end
$$;

-- (runs inserted as submit_message and create_run insert them: with the agent's handler)
create function pg_temp.queue(p_agent text, p_lane text, p_runs int) returns void
language sql
as $$
    insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model, handler)
    select a.org_id, a.agent_id, p_lane,
           case p_lane when 'interactive' then 'interactive' else 'manual' end,
           'th-' || p_agent || '-' || g, 'x', 'm', a.handler
    from runlane.agents as a
    cross join generate_series(1, p_runs) as g
    where a.agent_id = p_agent
    order by g;
$$;

create function pg_temp.claim(p_lanes text[], p_limit int, p_handlers text[])
returns table (agent_id text, handler text)
language sql
as $$
    select c.agent_id, c.handler
    from runlane.claim_runs('w1', p_lanes, p_limit, interval '60 seconds', null, false, p_handlers) as c
$$;

-- 10,000 queued chat runs of a handler nobody here serves, older than everything else.
do $$ begin perform pg_temp.queue('research-a', 'interactive', 10000); end $$;
do $$ begin perform pg_temp.queue('chat-a', 'interactive', 3); end $$;
do $$ begin perform pg_temp.queue('chat-b', 'interactive', 3); end $$;
analyze runlane.runs;

create temp table read_before on commit drop as select runlane_test.runs_entries_read() as n;
create temp table took on commit drop as select * from pg_temp.claim(array['interactive'], 2, array['chat']);
select is(
    (select array_agg(t.agent_id order by t.agent_id) from took as t),
    array['chat-a', 'chat-b'],
    'a claim for {chat} takes chat runs, one per organization (fair per handler)'
);
select is(
    (select array_agg(distinct t.handler) from took as t), array['chat'],
    'each claimed row names its handler'
);
select cmp_ok(
    runlane_test.runs_entries_read() - (select b.n from read_before as b), '<', 200::bigint,
    'the 10,000 queued runs of the unserved handler are not read'
);

select is(
    (select count(*) from pg_temp.claim(array['interactive'], 10, array['code'])), 0::bigint,
    'a claim for a handler with nothing queued takes nothing'
);
select is(
    (select count(*) from pg_temp.claim(array['interactive'], 10, array['chat', 'chat'])),
    4::bigint,
    'a handler named twice is one handler: the rest of the chat runs, each once'
);
select is(
    (select count(*) from runlane.runs as r where r.handler = 'research' and r.state = 'queued'),
    10000::bigint,
    'every research run is still queued'
);
select is(
    (select count(*) from runlane.claim_runs('w-old', array['interactive'], 5)), 5::bigint,
    'a claim without handlers (the earlier shape) takes any handler''s runs'
);

-- The cap counts the organization's running runs of every handler.
do $$ begin perform pg_temp.queue('code-a', 'background', 1); end $$;
do $$ begin perform pg_temp.queue('code-a2', 'background', 1); end $$;
do $$ begin perform pg_temp.queue('research-a', 'background', 1); end $$;
do $$ begin perform pg_temp.queue('code-a', 'interactive', 1); end $$;
select is(
    (select array_agg(t.agent_id) from pg_temp.claim(array['background'], 10, array['code']) as t),
    array['code-a'],
    'org-a (cap 1) gets one code run, its oldest'
);
select is(
    (select count(*) from pg_temp.claim(array['background'], 10, array['research'])), 0::bigint,
    'a research claim respects the cap its code run holds'
);

-- put_agent moves the agent's queued runs to its new handler, not its running ones.
select is(
    (runlane.put_agent('code-a', '{"handler": "code.v2"}')).handler, 'code.v2',
    'put_agent sets the handler'
);
select is(
    (
        select array_agg(distinct r.handler || ':' || r.state)
        from runlane.runs as r where r.agent_id = 'code-a'
    ),
    array['code.v2:queued', 'code:running'],
    'its queued run moved with it; its running run keeps what it was claimed as'
);
-- A worker of two handlers: each row names its own.
do $$
begin
    perform runlane_test.agent('chat-c', 'org-c');
    perform runlane_test.agent('code-c', 'org-c');
    update runlane.agents set handler = 'chat' where agent_id = 'chat-c';
    update runlane.agents set handler = 'code' where agent_id = 'code-c';
    perform pg_temp.queue('chat-c', 'interactive', 1);
    perform pg_temp.queue('code-c', 'interactive', 1);
end
$$;
select is(
    (
        select array_agg(t.agent_id || ':' || t.handler order by t.agent_id)
        from pg_temp.claim(array['interactive'], 10, array['code', 'chat']) as t
    ),
    array['chat-c:chat', 'code-c:code'],
    'a claim for {code, chat} takes both, each row naming its handler'
);

-- Gates close per handler: a claim of another handler leaves the gated run alone.
do $$
begin
    perform runlane_test.agent('research-c', 'org-c');
    update runlane.agents set handler = 'research' where agent_id = 'research-c';
    perform pg_temp.queue('research-c', 'background', 1);
    update runlane.agents set enabled = false where agent_id = 'research-c';
end
$$;
select is(
    (select count(*) from pg_temp.claim(array['background'], 10, array['code'])), 0::bigint,
    'a code claim takes nothing of org-c'
);
select is(
    (select r.state from runlane.runs as r where r.agent_id = 'research-c'), 'queued',
    'and leaves the switched-off research agent''s run queued'
);
select is(
    (
        select array_agg(c.skipped_reason || ':' || c.handler)
        from runlane.claim_runs(
            'w1', array['background'], 10, interval '60 seconds', null, true, array['research']
        ) as c
    ),
    array['agent_off:research'],
    'a research claim ends it skipped (agent_off) and reports it with its handler'
);

select throws_ok(
    $$ select runlane.put_agent('code-a', '{"handler": "Code X"}') $$,
    '22023',
    null,
    'a malformed handler is refused'
);
select throws_ok(
    $$ select * from pg_temp.claim(array['interactive'], 1, array['ok', null]) $$,
    '22023',
    null,
    'a claim naming a null handler is refused'
);
select throws_ok(
    $$ select * from pg_temp.claim(array['interactive'], 1, '{}') $$,
    '22023',
    null,
    'a claim naming no handler is refused'
);

select * from finish();
rollback;
