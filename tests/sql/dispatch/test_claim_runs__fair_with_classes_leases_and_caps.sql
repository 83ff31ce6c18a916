-- Round robin across organizations keeps every other claim rule: interactive-class work
-- before scheduled and reaction work, a busy computer's waiters untouched, runs not awake
-- left alone, and no organization above agent_max_concurrency. A blocked run gives its
-- organization's round to that organization's next eligible run.
begin;
select plan(9);

do $$ begin perform runlane_test.org('org-a', 1); end $$;
do $$ begin perform runlane_test.org('org-b', 10); end $$;
do $$ begin perform runlane_test.org('org-c', 10); end $$;
do $$ begin perform runlane_test.org('org-d', 2); end $$;
do $$ begin perform runlane_test.agent('a-running', 'org-a'); end $$;
do $$ begin perform runlane_test.agent('c-computer', 'org-c', 'computer-1'); end $$;

-- GUARD: org-a is at its cap of 1 and org-c's run holds computer-1.
create temp table q (label text primary key, run_id bigint) on commit drop;
insert into q values
('a-running', runlane_test.queued_run('a-running')),
('c-computer', runlane_test.queued_run('c-computer'));
create temp table started on commit drop as
select * from runlane.claim_runs('w0', array['background'], 10);

select is(
    (select count(*) from started),
    2::bigint,
    'setup: org-a''s running run and the run holding computer-1 are claimed'
);

-- GUARD: the queues, oldest first: scheduled and reaction (class 1) runs before any
-- interactive-class (class 0) run.
select runlane_test.agent(v.agent_id, v.org_id, v.computer_id)
from (
    values
    ('a-s1', 'org-a', null), ('a-s2', 'org-a', null), ('b-r1', 'org-b', null),
    ('c-s1', 'org-c', null), ('c-s2', 'org-c', null), ('a-chat', 'org-a', null),
    ('b-m1', 'org-b', 'computer-1'), ('b-m2', 'org-b', null), ('c-chat', 'org-c', null),
    ('d-m1', 'org-d', null), ('d-m2', 'org-d', null), ('d-m3', 'org-d', null),
    ('d-m4', 'org-d', null)
) as v (agent_id, org_id, computer_id);
insert into q values ('a-s1', runlane_test.queued_run('a-s1', 'background', 'scheduled'));
insert into q values ('a-s2', runlane_test.queued_run('a-s2', 'background', 'scheduled'));
insert into q values ('b-r1', runlane_test.queued_run('b-r1', 'background', 'reaction'));
insert into q values ('c-s1', runlane_test.queued_run('c-s1', 'background', 'scheduled'));
insert into q values ('c-s2', runlane_test.queued_run('c-s2', 'background', 'scheduled'));
insert into q values ('a-i1', runlane_test.queued_run('a-chat', 'interactive', 'interactive'));
insert into q values ('a-i2', runlane_test.queued_run('a-chat', 'interactive', 'interactive'));
insert into q values ('a-i3', runlane_test.queued_run('a-chat', 'interactive', 'interactive'));
insert into q values ('b-m1', runlane_test.queued_run('b-m1', 'background', 'manual'));
insert into q values ('b-m2', runlane_test.queued_run('b-m2', 'background', 'manual'));
insert into q values (
    'c-i1', runlane_test.queued_run('c-chat', 'interactive', 'interactive', now() + interval '1 hour')
);
insert into q values ('c-i2', runlane_test.queued_run('c-chat', 'interactive', 'interactive'));
insert into q values ('d-m1', runlane_test.queued_run('d-m1', 'background', 'manual'));
insert into q values ('d-m2', runlane_test.queued_run('d-m2', 'background', 'manual'));
insert into q values ('d-m3', runlane_test.queued_run('d-m3', 'background', 'manual'));
insert into q values ('d-m4', runlane_test.queued_run('d-m4', 'background', 'manual'));

select is(
    (
        select array_agg(q.label order by c.ordinality)
        from runlane.claim_runs('w1', array['interactive', 'background'], 4) with ordinality as c
        inner join q on c.run_id = q.run_id
    ),
    array['a-i1', 'b-m2', 'c-i2', 'd-m1'],
    'round one: each organization''s oldest eligible run, oldest first, before any scheduled or reaction run'
);
select is(
    (select state || '/' || attempts || '/' || fence from runlane.runs where run_id = (select run_id from q where label = 'b-m1')),
    'queued/0/0',
    'the run waiting for the busy computer is untouched and its organization''s next run took the round'
);
select is(
    (select state from runlane.runs where run_id = (select run_id from q where label = 'c-i1')),
    'queued',
    'a run not awake yet is not taken and does not hold its organization''s round'
);

select is(
    (
        select array_agg(q.label order by c.ordinality)
        from runlane.claim_runs('w2', array['interactive', 'background'], 100) with ordinality as c
        inner join q on c.run_id = q.run_id
    ),
    array['a-i2', 'd-m2', 'a-i3', 'b-r1', 'c-s1', 'c-s2'],
    'then the next rounds of class 0, then class 1 round robin; capped organizations only up to their cap'
);
select is(
    (
        select array_agg(state || '/' || attempts order by run_id) from runlane.runs
        where run_id in (select run_id from q where label in ('d-m3', 'd-m4', 'a-s1', 'a-s2'))
    ),
    array['queued/0', 'queued/0', 'queued/0', 'queued/0'],
    'runs of organizations at their cap stay queued with no attempt counted'
);
select is(
    (select count(*) from runlane.runs where org_id = 'org-d' and lane = 'background' and state = 'running'),
    2::bigint,
    'org-d runs exactly its cap of 2'
);

-- Freeing the computer makes its waiter eligible again.
do $$
begin
    perform runlane.finish_run(s.run_id, s.fence, 'succeeded')
    from started as s
    where s.run_id = (select q.run_id from q where q.label = 'c-computer');
end
$$;
select is(
    (
        select array_agg(q.label order by c.ordinality)
        from runlane.claim_runs('w3', array['interactive', 'background'], 100) with ordinality as c
        inner join q on c.run_id = q.run_id
    ),
    array['b-m1'],
    'once the computer is free its waiter is claimed, and nothing above a cap'
);
select is(
    (select computer_leases.run_id from runlane.computer_leases where computer_leases.computer_id = 'computer-1'),
    (select run_id from q where label = 'b-m1'),
    'the claim took the computer lease for the waiter'
);

select * from finish();
rollback;
