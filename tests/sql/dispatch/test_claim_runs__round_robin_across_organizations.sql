-- Within a priority class, claims take runs round robin across organizations, oldest
-- first within each: a busy organization never starves one with a single queued run.
begin;
select plan(8);

do $$ begin perform runlane_test.agent('agent-a', 'org-a'); end $$;
do $$ begin perform runlane_test.agent('agent-b', 'org-b'); end $$;
do $$ begin perform runlane_test.agent('agent-c', 'org-c'); end $$;

-- GUARD: org-a has 10,000 queued chat runs, org-b one queued after them.
create temp table q (label text primary key, run_id bigint) on commit drop;
-- (explicit ids below every generated one: older, and the id sequence is left alone)
insert into runlane.runs (run_id, org_id, agent_id, lane, trigger, thread_id, prompt, model)
select
    g - 10001 as run_id,
    'org-a' as org_id,
    'agent-a' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    'thread-' || g as thread_id,
    'p' as prompt,
    'm' as model
from generate_series(1, 10000) as g;
insert into q values ('b1', runlane_test.queued_run('agent-b', 'interactive', 'interactive'));

select is(
    (select array_agg(run_id) from runlane.claim_runs('w', array['interactive'], 2)),
    array[
        (select min(run_id) from runlane.runs where org_id = 'org-a'),
        (select run_id from q where label = 'b1')
    ],
    'the very next claim takes the busy organization''s oldest run and the newcomer''s run'
);
select is(
    (select count(*) from runlane.runs where org_id = 'org-a' and state = 'queued'),
    9999::bigint,
    'the busy organization keeps the rest of its queue'
);

update runlane.runs set state = 'canceled', finished_at = now() where state in ('queued', 'running');

-- GUARD: unequal queues, each organization's runs inserted as a block (a: 5, b: 3, c: 1).
insert into q
select
    'a' || g as label,
    runlane_test.queued_run('agent-a', 'interactive', 'interactive') as run_id
from generate_series(1, 5) as g;
insert into q
select
    'b' || g as label,
    runlane_test.queued_run('agent-b', 'interactive', 'interactive') as run_id
from generate_series(1, 3) as g
on conflict (label) do update set run_id = excluded.run_id;
insert into q values ('c1', runlane_test.queued_run('agent-c', 'interactive', 'interactive'));

create temp table label_of on commit drop as select
    run_id,
    label
from q;

select is(
    (
        select array_agg(l.label order by c.ordinality)
        from runlane.claim_runs('w', array['interactive'], 3) with ordinality as c
        inner join label_of as l on c.run_id = l.run_id
    ),
    array['a1', 'b1', 'c1'],
    'the first claim holds one run of each organization, in round-robin order'
);
select is(
    (
        select array_agg(l.label order by c.ordinality)
        from runlane.claim_runs('w', array['interactive'], 3) with ordinality as c
        inner join label_of as l on c.run_id = l.run_id
    ),
    array['a2', 'b2', 'a3'],
    'the next claim goes round again over the organizations that still have queued runs'
);
select is(
    (
        select array_agg(l.label order by c.ordinality)
        from runlane.claim_runs('w', array['interactive'], 10) with ordinality as c
        inner join label_of as l on c.run_id = l.run_id
    ),
    array['a4', 'b3', 'a5'],
    'within a round the oldest run goes first, and each organization''s runs oldest first'
);

-- GUARD: a claim spanning both lanes merges them per organization, oldest first.
select runlane_test.agent('agent-a' || g, 'org-a') from generate_series(2, 3) as g;
do $$ begin perform runlane_test.agent('agent-b2', 'org-b'); end $$;
update q set run_id = runlane_test.queued_run('agent-a', 'interactive', 'interactive') where label = 'a1';
update q set run_id = runlane_test.queued_run('agent-a2', 'background', 'manual') where label = 'a2';
update q set run_id = runlane_test.queued_run('agent-a3', 'background', 'test') where label = 'a3';
update q set run_id = runlane_test.queued_run('agent-b2', 'background', 'manual') where label = 'b1';
truncate label_of;
insert into label_of select
    run_id,
    label
from q;

select is(
    (
        select array_agg(l.label order by c.ordinality)
        from runlane.claim_runs('w', array['interactive', 'background'], 10) with ordinality as c
        inner join label_of as l on c.run_id = l.run_id
    ),
    array['a1', 'b1', 'a2', 'a3'],
    'a claim over both lanes counts rounds per organization across the lanes'
);
select is(
    (select count(*) from runlane.runs where state = 'queued'),
    0::bigint,
    'nothing eligible is left behind'
);

-- GUARD: a skewed queue: org-a's 100 runs are the oldest, then 30 organizations with one
-- run each (more organizations than the claim needs).
select runlane_test.agent('agent-n' || g, 'org-n' || g) from generate_series(1, 30) as g;
insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model)
select
    'org-a' as org_id,
    'agent-a' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    'thread-' || g as thread_id,
    'p' as prompt,
    'm' as model
from generate_series(1, 100) as g;
do $$
begin
    perform runlane_test.queued_run('agent-n' || g, 'interactive', 'interactive')
    from generate_series(1, 30) as g;
end
$$;

select is(
    (select array_agg(org_id) from runlane.claim_runs('w', array['interactive'], 5)),
    array['org-a', 'org-n1', 'org-n2', 'org-n3', 'org-n4'],
    'with many organizations behind a busy one, the claim takes one run of each, oldest first'
);

select * from finish();
rollback;
