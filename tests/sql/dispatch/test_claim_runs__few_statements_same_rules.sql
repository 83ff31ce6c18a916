-- The short paths of claim_runs keep every rule: class 1 read from the class-0 window is
-- still round robin (and a skewed class 1 still reaches its loose scan), an
-- interactive-only claim skips the cap machinery yet stays fair and never hands one
-- computer to two runs, and an empty claim returns nothing.
begin;
select plan(7);

do $$ begin perform runlane_test.org('org-x', 1000); end $$;
do $$ begin perform runlane_test.org('org-y', 1000); end $$;
do $$ begin perform runlane_test.org('org-z', 1000); end $$;

select is(
    (select count(*) from runlane.claim_runs('w0', array['interactive', 'background'], 10)),
    0::bigint,
    'an empty queue gives an empty claim'
);

-- GUARD: class 0 holds two runs of org-z; class 1 holds 70 runs of org-x, then one of
-- org-y. A claim of 4 reads a window of 64 (4 x (2 x 4 + 8)): both class-0 runs and 62
-- class-1 runs, all org-x's, so class 1 needs its loose scan to find org-y.
create temp table q (label text primary key, run_id bigint) on commit drop;
do $$
begin
    perform runlane_test.agent('z-' || i, 'org-z') from generate_series(1, 2) as i;
    perform runlane_test.agent('x-' || i, 'org-x') from generate_series(1, 70) as i;
    perform runlane_test.agent('y-1', 'org-y');
    insert into q (label, run_id)
    select 'z-' || i, runlane_test.queued_run('z-' || i, 'background', 'manual')
    from generate_series(1, 2) as i;
    insert into q (label, run_id)
    select 'x-' || i, runlane_test.queued_run('x-' || i, 'background', 'scheduled')
    from generate_series(1, 70) as i;
    insert into q (label, run_id)
    values ('y-1', runlane_test.queued_run('y-1', 'background', 'reaction'));
end
$$;

select is(
    (
        select array_agg(q.label order by c.ordinality)
        from runlane.claim_runs('w1', array['background'], 4) with ordinality as c
        inner join q on c.run_id = q.run_id
    ),
    array['z-1', 'z-2', 'x-1', 'y-1'],
    'class 0 first, then class 1 round robin: org-y''s run behind 70 of org-x''s is in the same claim'
);
select is(
    (
        select array_agg(q.label order by c.ordinality)
        from runlane.claim_runs('w2', array['background'], 3) with ordinality as c
        inner join q on c.run_id = q.run_id
    ),
    array['x-2', 'x-3', 'x-4'],
    'with one organization left in class 1, its runs follow oldest first'
);

-- GUARD: chat runs: org-x has three, then org-y one; two more of org-z share computer-9.
do $$
begin
    perform runlane_test.agent('x-chat', 'org-x');
    perform runlane_test.agent('y-chat', 'org-y');
    perform runlane_test.agent('z-chat', 'org-z', 'computer-9');
    insert into q (label, run_id)
    select 'x-i' || i, runlane_test.queued_run('x-chat', 'interactive', 'interactive')
    from generate_series(1, 3) as i;
    insert into q (label, run_id)
    values ('y-i1', runlane_test.queued_run('y-chat', 'interactive', 'interactive'));
end
$$;

select is(
    (
        select array_agg(q.label order by c.ordinality)
        from runlane.claim_runs('w3', array['interactive'], 2) with ordinality as c
        inner join q on c.run_id = q.run_id
    ),
    array['x-i1', 'y-i1'],
    'an interactive-only claim is round robin across organizations'
);

insert into q (label, run_id) values
('z-i1', runlane_test.queued_run('z-chat', 'interactive', 'interactive')),
('z-i2', runlane_test.queued_run('z-chat', 'interactive', 'interactive'));
select is(
    (
        select array_agg(q.label order by c.ordinality)
        from runlane.claim_runs('w4', array['interactive'], 10) with ordinality as c
        inner join q on c.run_id = q.run_id
    ),
    array['x-i2', 'z-i1', 'x-i3'],
    'an interactive-only claim takes one run per computer: the second run of computer-9 waits'
);
select is(
    (
        select state || '/' || attempts || '/' || fence from runlane.runs
        where run_id = (select run_id from q where label = 'z-i2')
    ),
    'queued/0/0',
    'the computer''s waiter is untouched'
);
select is(
    (
        select cl.run_id from runlane.computer_leases as cl
        where cl.computer_id = 'computer-9'
    ),
    (select run_id from q where label = 'z-i1'),
    'the claimed chat run holds computer-9''s lease'
);

select * from finish();
rollback;
