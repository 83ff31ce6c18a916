-- The worker's claim (keyed, reporting skips) takes an idle queue of chat runs in one
-- find-and-lock statement and one claim statement; asking for the background lane too
-- sends the same queue down the fair path. Both return the same runs in the same order
-- with the same fences, attempts, caps and timing rows, journal the same run.claimed rows,
-- record the same receipt, apply the per-worker organization bound alike, and a resend of
-- the idle claim with its key returns its runs again without claiming more.
begin;
select plan(12);

do $$
begin
    perform runlane_test.org('org-a', 1000);
    perform runlane_test.org('org-b', 1000);
    perform runlane_test.agent('a-chat', 'org-a');
    perform runlane_test.agent('b-chat', 'org-b');
end
$$;

create temp table q (label text primary key, run_id bigint not null) on commit drop;
create temp table got (
    path text, position bigint, label text, fence bigint, attempt int, lane text,
    trigger text, iteration_cap int, late_notice jsonb, timing jsonb, skipped_reason text
) on commit drop;

-- The same queue twice: a1, a2 (org-a) and b1 (org-b), in that order.
create function pg_temp.queue(p_prefix text) returns void
language sql
as $$
    insert into q (label, run_id)
    values
        (p_prefix || 'a1', runlane_test.queued_run('a-chat', 'interactive', 'interactive')),
        (p_prefix || 'a2', runlane_test.queued_run('a-chat', 'interactive', 'interactive')),
        (p_prefix || 'b1', runlane_test.queued_run('b-chat', 'interactive', 'interactive'));
$$;

create function pg_temp.claim(p_path text, p_worker text, p_lanes text[], p_key uuid)
returns void
language sql
as $$
    insert into got
    select
        p_path, c.ordinality, substr(q.label, 2), c.fence, c.attempt, c.lane, c.trigger,
        c.iteration_cap, c.late_notice, c.timing - 'run.pre_run_wait_ms' - 'run.queue_wait_ms'
        - 'run.id', c.skipped_reason
    from runlane.claim_runs(p_worker, p_lanes, 10, interval '60 seconds', p_key, true)
        with ordinality as c
    inner join q on c.run_id = q.run_id;
$$;

do $$ begin
    perform pg_temp.queue('i');
end $$;
do $$ begin
    perform pg_temp.claim('idle', 'w-idle', array['interactive'], '00000000-0000-0000-0000-0000000000a1');
end $$;
do $$ begin
    perform pg_temp.queue('f');
end $$;
do $$ begin
    perform pg_temp.claim(
        'fair', 'w-fair', array['interactive', 'background'], '00000000-0000-0000-0000-0000000000f1'
    );
end $$;

select results_eq(
    $$select label from got where path = 'idle' order by position$$,
    $$values ('a1'), ('b1'), ('a2')$$,
    'the idle claim takes the whole queue in round robin order'
);
select results_eq(
    $$select label, fence, attempt, lane, trigger, iteration_cap, late_notice, timing, skipped_reason
      from got where path = 'idle' order by position$$,
    $$select label, fence, attempt, lane, trigger, iteration_cap, late_notice, timing, skipped_reason
      from got where path = 'fair' order by position$$,
    'the idle path and the fair path return the same runs, order, fences, caps and timing rows'
);
select is(
    (select count(*) from got where path = 'idle' and timing ->> 'event' = 'run.execution_started'),
    3::bigint,
    'each claimed run comes with its run.execution_started timing row'
);
select results_eq(
    $$select substr(q.label, 2), e.detail from runlane.run_events as e
      inner join q on e.run_id = q.run_id
      where e.event = 'run.claimed' and q.label like 'i%' order by 1$$,
    $$select substr(q.label, 2), e.detail from runlane.run_events as e
      inner join q on e.run_id = q.run_id
      where e.event = 'run.claimed' and q.label like 'f%' order by 1$$,
    'both paths journal the same run.claimed row once per run'
);
select results_eq(
    $$select substr(q.label, 2), u.fence
      from runlane_test.claim_receipts() as c
      cross join lateral unnest(c.run_ids, c.fences) with ordinality as u (run_id, fence, position)
      inner join q on u.run_id = q.run_id
      where c.worker_id = 'w-idle' order by u.position$$,
    $$select substr(q.label, 2), u.fence
      from runlane_test.claim_receipts() as c
      cross join lateral unnest(c.run_ids, c.fences) with ordinality as u (run_id, fence, position)
      inner join q on u.run_id = q.run_id
      where c.worker_id = 'w-fair' order by u.position$$,
    'both paths record the same receipt: the claimed runs in claim order with their fences'
);
select is(
    (select c.claim_key from runlane_test.claim_receipts() as c where c.worker_id = 'w-idle'),
    '00000000-0000-0000-0000-0000000000a1'::uuid,
    'the idle claim records its key'
);

-- A resend of the idle claim with its key (its reply was lost).
do $$ begin
    perform pg_temp.claim(
        'resent', 'w-idle', array['interactive'], '00000000-0000-0000-0000-0000000000a1'
    );
end $$;
select results_eq(
    $$select label, fence, attempt from got where path = 'resent' order by position$$,
    $$select label, fence, attempt from got where path = 'idle' order by position$$,
    'the resend returns the idle claim''s runs, fences and attempts in the same order'
);
select is(
    (select count(*) from runlane.run_events where event = 'run.claimed'),
    6::bigint,
    'the resend claimed nothing and journaled nothing'
);

-- The per-worker organization bound: one running run per organization for this worker.
do $$
begin
    perform set_config('runlane.max_per_org', '1', true);
end
$$;
do $$ begin
    perform pg_temp.queue('j');
end $$;
do $$ begin
    perform pg_temp.claim('idle-bound', 'w-idle-2', array['interactive'], null);
end $$;
select results_eq(
    $$select label from got where path = 'idle-bound' order by position$$,
    $$values ('a1'), ('b1')$$,
    'the idle path applies the bound: the second run of org-a is left'
);
select is(
    (
        select state || '/' || attempts || '/' || fence from runlane.runs
        where run_id = (select run_id from q where label = 'ja2')
    ),
    'queued/0/0',
    'the run over the bound is left queued and untouched'
);
-- (the run left over the bound sleeps now: the fair claim below sees the same queue)
update runlane.runs set wake_at = now() + interval '1 hour'
where run_id = (select run_id from q where label = 'ja2');
do $$ begin
    perform pg_temp.queue('g');
end $$;
do $$ begin
    perform pg_temp.claim('fair-bound', 'w-fair-2', array['interactive', 'background'], null);
end $$;

select results_eq(
    $$select label, fence, attempt from got where path = 'idle-bound' order by position$$,
    $$select label, fence, attempt from got where path = 'fair-bound' order by position$$,
    'the fair path applies the same bound to the same queue'
);
select is(
    (
        select count(*) from runlane_test.claim_receipts()
        where worker_id in ('w-idle-2', 'w-fair-2')
    ),
    0::bigint,
    'an unkeyed claim records no receipt'
);

select * from finish();
rollback;
