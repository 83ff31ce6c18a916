-- Every row the functions write into the six tables that reach their organization through
-- a run, an agent or a user names that organization itself (org_id), whichever path wrote
-- it: a message and its thread, a keyed message, a claim with a computer lease, outputs
-- one at a time, in a batch and with a finish, a charge, a retry, a release, a cancel, a
-- chat lease that expired, a batched finish that writes a thread's row again, a skipped
-- run.
begin;
select plan(12);

do $$
begin
    perform runlane.put_org('org-n');
    perform runlane.put_user('owner-n', 'org-n');
    perform runlane.put_agent('agent-n', '{"org_id": "org-n", "owner_id": "owner-n", "model": "m"}');
    perform runlane.put_agent(
        'agent-box', '{"org_id": "org-n", "owner_id": "owner-n", "model": "m", "computer_id": "box-n"}'
    );
    -- another organization's rows beside them, which must keep their own
    perform runlane.put_org('org-m');
    perform runlane.put_user('owner-m', 'org-m');
    perform runlane.put_agent('agent-m', '{"org_id": "org-m", "owner_id": "owner-m", "model": "m"}');
    -- chat: one message per thread, one of them keyed
    perform runlane.send_message('agent-n', 'thread-1', 'hello');
    perform runlane.send_message('agent-n', 'thread-2', 'hello again', 'key-1');
    perform runlane.send_message('agent-m', 'thread-1', 'hello from m');
    -- background: a run on a computer
    perform runlane.run_now('agent-box');
end
$$;

create temporary table claimed on commit drop as (
    select
        c.run_id,
        c.fence,
        c.org_id,
        c.lane
    from runlane.claim_runs('worker-n', array['interactive', 'background'], 10) as c
);

select ok(
    (select count(*) from claimed) = 4,
    'the three chat runs and the computer-bound run are claimed'
);
select is(
    (select cl.org_id from runlane.computer_leases as cl where cl.computer_id = 'box-n'),
    'org-n', 'the computer lease names its run''s organization'
);

do $$
begin
    -- outputs: one at a time, a numbered batch, and with a batched finish
    perform runlane.append_output(c.run_id, c.fence, 'text', 'one')
    from claimed as c
    where c.org_id = 'org-m';
    perform runlane.append_outputs(
        array_agg(c.run_id), array_agg(c.fence), array_agg(1::bigint), array_agg('text'::text),
        array_agg('two'::text)
    )
    from claimed as c
    where c.lane = 'interactive' and c.org_id = 'org-n';
    perform runlane.charge(c.run_id, c.fence, 2.5)
    from claimed as c
    where c.lane = 'background';
    -- (a thread whose row retention deleted meanwhile: the finish writes it again)
    delete from runlane.threads as t where t.agent_id = 'agent-m';
    perform runlane.finish_runs(
        array_agg(c.run_id), array_agg(c.fence), array_agg('succeeded'::text), array_agg(null::text),
        array_agg(0::numeric), array_agg(1), array_agg('final'::text), array_agg('done'::text)
    )
    from claimed as c
    where c.lane = 'interactive';
    -- the computer-bound run: retried, claimed again, released, claimed again, expired, reaped
    perform runlane.retry_run(c.run_id, c.fence, 'flaky', interval '0 seconds')
    from claimed as c
    where c.lane = 'background';
    perform runlane.release_run(r.run_id, r.fence)
    from runlane.claim_runs('worker-n', array['background'], 1) as r;
    perform runlane_test.lease_expired(r.run_id)
    from runlane.claim_runs('worker-n', array['background'], 1) as r;
    perform runlane.reap_stale();
    -- a chat run whose lease expired: back in the queue
    perform runlane.send_message('agent-m', 'thread-2', 'are you there');
    perform runlane_test.lease_expired(r.run_id)
    from runlane.claim_runs('worker-n', array['interactive'], 1) as r;
    perform runlane.reap_stale();
    -- a running run canceled
    perform runlane.run_now('agent-m');
    perform runlane.cancel_run(r.run_id)
    from runlane.claim_runs('worker-n', array['background'], 1) as r;
    -- a run skipped at its claim: its agent was switched off after it was queued
    perform runlane.run_now('agent-n');
    perform runlane.put_agent('agent-n', '{"enabled": false}');
    perform runlane.claim_runs('worker-n', array['background'], 10);
end
$$;

-- Every row of the six tables names the organization of its run, agent or owner.
select is(
    (
        select count(*)
        from runlane.run_outputs as o
        inner join runlane.runs as r on o.run_id = r.run_id
        where o.org_id is distinct from r.org_id
    ),
    0::bigint,
    'every output names its run''s organization'
);
select is(
    (select count(distinct o.org_id) from runlane.run_outputs as o),
    2::bigint,
    'outputs of both organizations'
);
select is(
    (
        select count(*)
        from runlane.run_events as e
        inner join runlane.runs as r on e.run_id = r.run_id
        where e.org_id is distinct from r.org_id
    ),
    0::bigint,
    'every journal row names its run''s organization'
);
select is(
    (select array_agg(distinct e.event order by e.event) from runlane.run_events as e),
    array[
        'run.cancel_requested', 'run.claimed', 'run.finished', 'run.lease_expired',
        'run.released', 'run.retry_scheduled', 'run.skipped'
    ]::text[],
    'the journal rows of every path'
);
select is(
    (
        select count(*)
        from runlane.threads as t
        inner join runlane.agents as a on t.agent_id = a.agent_id
        where t.org_id is distinct from a.org_id
    ),
    0::bigint,
    'every thread names its agent''s organization'
);
select is((select count(*) from runlane.threads), 4::bigint, 'the four threads');
select is(
    (
        select count(*)
        from runlane.idempotency_keys as k
        inner join runlane.agents as a on k.agent_id = a.agent_id
        where k.org_id is distinct from a.org_id
    ),
    0::bigint,
    'the key names its agent''s organization'
);
select is((select count(*) from runlane.idempotency_keys), 1::bigint, 'the one key');
select is(
    (
        select count(*)
        from runlane.charge_buckets as b
        inner join runlane.users as u on b.owner_id = u.user_id
        where b.org_id is distinct from u.org_id
    ),
    0::bigint,
    'the bucket names its owner''s organization'
);
select is((select count(*) from runlane.charge_buckets), 1::bigint, 'the one bucket');

select * from finish();
rollback;
