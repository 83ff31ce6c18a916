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
select g - 1001, 'org-a', 'agent-a', 'interactive', 'interactive', 'thread-' || g, 'p', 'm'
from generate_series(1, 300) as g;
do $$
begin
    for i in 1..2 loop
        perform runlane_test.queued_run('agent-b', 'interactive', 'interactive');
        perform runlane_test.queued_run('agent-c', 'interactive', 'interactive');
    end loop;
end $$;

create temp table claimed (path text, claim int, position bigint, run_id bigint) on commit drop;

-- The same three claims of 3 (14 candidates wanted, a window of 56 rows: all org-a's),
-- once from a session that reads the window first, then, with those runs queued again,
-- once from a session told to skip it.
do $$ begin perform set_config('runlane.claim_skip_window', 'off', false); end $$;
insert into claimed select 'window first', 1, c.ordinality, c.run_id
from runlane.claim_runs('w', array['interactive'], 3) with ordinality as c;
select is(current_setting('runlane.claim_skip_window'), 'on',
    'a full window of one organization tells the session to skip it from now on');
insert into claimed select 'window first', 2, c.ordinality, c.run_id
from runlane.claim_runs('w', array['interactive'], 3) with ordinality as c;
insert into claimed select 'window first', 3, c.ordinality, c.run_id
from runlane.claim_runs('w', array['interactive'], 3) with ordinality as c;
update runlane.runs
set state = 'queued', lease_owner = null, lease_expires_at = null, heartbeat_at = null
where state = 'running';

do $$ begin perform set_config('runlane.claim_skip_window', 'on', false); end $$;
insert into claimed select 'skip', 1, c.ordinality, c.run_id
from runlane.claim_runs('w', array['interactive'], 3) with ordinality as c;
insert into claimed select 'skip', 2, c.ordinality, c.run_id
from runlane.claim_runs('w', array['interactive'], 3) with ordinality as c;
insert into claimed select 'skip', 3, c.ordinality, c.run_id
from runlane.claim_runs('w', array['interactive'], 3) with ordinality as c;

select is(
    (select array_agg(run_id order by claim, position) from claimed where path = 'skip'),
    (select array_agg(run_id order by claim, position) from claimed where path = 'window first'),
    'skipping the window claims the same runs in the same order'
);
select is(
    (select array_agg(r.org_id order by c.claim, c.position)
     from claimed as c join runlane.runs as r using (run_id) where c.path = 'skip'),
    array['org-a', 'org-b', 'org-c', 'org-a', 'org-b', 'org-c', 'org-a', 'org-a', 'org-a'],
    'round robin across the organizations, oldest first within each'
);
select is(
    (select count(*) from runlane.runs where state = 'running'),
    9::bigint,
    'nine runs claimed, each once'
);
select is(current_setting('runlane.claim_skip_window'), 'on',
    'with one organization left to find, the session keeps skipping the window');

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
    (select count(distinct r.org_id)
     from runlane.claim_runs('w', array['interactive'], 3) as c
     join runlane.runs as r using (run_id)),
    3::bigint,
    'the claim after them takes one run of three organizations'
);
select is(current_setting('runlane.claim_skip_window'), 'off',
    'enough organizations found: the window is read again from the next claim');

select * from finish();
rollback;
