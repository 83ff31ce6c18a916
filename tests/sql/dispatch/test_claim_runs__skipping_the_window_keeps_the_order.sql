-- A claim whose window of oldest runs was full but held too few organizations tells its
-- session to skip the window (runlane.claim_skip_window) and go to the loose index scan
-- first; once that scan finds enough organizations the window is used again. Both paths
-- are exact: the same claim returns the same runs in the same order either way, and a
-- session that sets the setting itself changes only what its claims cost.
begin;
select plan(7);

do $$ begin perform runlane_test.agent('agent-a', 'org-a'); end $$;
do $$ begin perform runlane_test.agent('agent-b', 'org-b'); end $$;
do $$ begin perform runlane_test.agent('agent-c', 'org-c'); end $$;

-- GUARD: org-a's backlog of 300 chat runs is the oldest; org-b and org-c have two each.
insert into runlane.runs (run_id, org_id, agent_id, lane, trigger, thread_id, prompt, model)
select
    g - 1001 as run_id,
    'org-a' as org_id,
    'agent-a' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    'thread-' || g as thread_id,
    'p' as prompt,
    'm' as model
from generate_series(1, 300) as g;
do $$
begin
    for i in 1..2 loop
        perform runlane_test.queued_run('agent-b', 'interactive', 'interactive');
        perform runlane_test.queued_run('agent-c', 'interactive', 'interactive');
    end loop;
end $$;

create temp table claimed (path text, claim int, position bigint, run_id bigint) on commit drop;

-- Three claims of 3 runs each (14 candidates wanted, a window of 56 rows: all org-a's),
-- recorded under p_path, from a session whose setting is p_skip_window.
create function pg_temp.three_claims(p_path text, p_skip_window text)
returns void
language plpgsql
as $$
begin
    perform set_config('runlane.claim_skip_window', p_skip_window, false);
    for k in 1..3 loop
        insert into claimed (path, claim, position, run_id)
        select p_path, k, c.ordinality, c.run_id
        from runlane.claim_runs('w', array['interactive'], 3) with ordinality as c;
        if k = 1 and p_skip_window = 'off' then
            insert into claimed (path, claim, position, run_id)
            values ('setting after the first claim', 0, 0,
                    (current_setting('runlane.claim_skip_window') = 'on')::int);
        end if;
    end loop;
end;
$$;

-- Once from a session that reads the window first, then, with those runs queued again,
-- once from a session told to skip it.
do $$ begin perform pg_temp.three_claims('window first', 'off'); end $$;
update runlane.runs
set state = 'queued', lease_owner = null, lease_expires_at = null, heartbeat_at = null
where state = 'running';
do $$ begin perform pg_temp.three_claims('skip', 'on'); end $$;

select is(
    (select c.run_id from claimed as c where c.path = 'setting after the first claim'),
    1::bigint,
    'a full window of one organization tells the session to skip it from now on'
);
select is(
    (select array_agg(c.run_id order by c.claim, c.position) from claimed as c where c.path = 'skip'),
    (
        select array_agg(c.run_id order by c.claim, c.position)
        from claimed as c
        where c.path = 'window first'
    ),
    'skipping the window claims the same runs in the same order'
);
select is(
    (
        select array_agg(r.org_id order by c.claim, c.position)
        from claimed as c
        inner join runlane.runs as r on c.run_id = r.run_id
        where c.path = 'skip'
    ),
    array['org-a', 'org-b', 'org-c', 'org-a', 'org-b', 'org-c', 'org-a', 'org-a', 'org-a'],
    'round robin across the organizations, oldest first within each'
);
select is(
    (select count(*) from runlane.runs where state = 'running'),
    9::bigint,
    'nine runs claimed, each once'
);
select is(
    current_setting('runlane.claim_skip_window'),
    'on',
    'with one organization left to find, the session keeps skipping the window'
);

-- GUARD: sixteen more organizations with one queued run each: the loose scan finds enough
-- organizations for round one (14 wanted), and the window answers again.
do $$
begin
    for i in 1..16 loop
        perform runlane_test.agent('agent-m' || i, 'org-m' || i);
        perform runlane_test.queued_run('agent-m' || i, 'interactive', 'interactive');
    end loop;
end $$;
select is(
    (
        select count(distinct r.org_id)
        from runlane.claim_runs('w', array['interactive'], 3) as c
        inner join runlane.runs as r on c.run_id = r.run_id
    ),
    3::bigint,
    'the claim after them takes one run of three organizations'
);
select is(
    current_setting('runlane.claim_skip_window'),
    'off',
    'enough organizations found: the window is read again from the next claim'
);

select * from finish();
rollback;
