-- erase_org deletes the organization with its settings, users, agents, runs, messages,
-- outputs, journal, keys, threads, charges, buckets, claim-lock row and the entries of
-- logins limited to it, and nothing of another organization; 55006 while a run of it is
-- unfinished, with nothing deleted; afterwards it answers as one that never existed.
begin;
select plan(11);

create role erase_org_login_t nologin;
do $$
begin
    perform runlane_test.agent('agent-1-eo', 'org-gone-eo', null, 'user-1-eo');
    perform runlane_test.agent('agent-2-eo', 'org-gone-eo', null, 'user-2-eo');
    perform runlane_test.owner('user-3-eo', 'org-gone-eo');  -- a user without agents
    perform runlane_test.agent('agent-kept-eo', 'org-kept-eo');
    perform runlane_test.chat_turn('agent-1-eo', 'thread-1', 'hidden words one', 2);
    perform runlane_test.chat_turn('agent-2-eo', 'thread-1', 'hidden words two', 3);
    perform runlane_test.chat_turn('agent-kept-eo', 'thread-1', 'kept words', 4);
    insert into runlane.api_logins (role_oid, org_id) values ('erase_org_login_t'::regrole, 'org-gone-eo');
    insert into runlane.org_claim_locks (org_id) values ('org-gone-eo') on conflict do nothing;
end
$$;

create temporary table spend_before on commit drop as
select runlane.weekly_spend('owner-of-org-kept-eo') as spend;

do $$ begin perform runlane_test.queued_run('agent-1-eo'); end $$;
select throws_ok(
    $$select runlane.erase_org('org-gone-eo')$$, '55006', null, 'not while a run of it is unfinished'
);
select is(
    (select count(*) from runlane.users as u where u.org_id = 'org-gone-eo'), 3::bigint, 'nothing was deleted'
);
update runlane.runs set state = 'canceled', finished_at = now() where state = 'queued';

select is(runlane.erase_org('org-gone-eo'), 3, 'returns the runs erased');
select is(
    array(
        select n from unnest(array['user-1-eo', 'user-2-eo', 'user-3-eo', 'agent-1-eo', 'agent-2-eo']) as n
        where runlane_test.rows_mentioning(n) <> '{}'
    ),
    '{}', 'no row of any table names its users or agents (charges and buckets included)'
);
select is(
    (select count(*) from runlane.api_logins as l where l.role_oid = 'erase_org_login_t'::regrole), 0::bigint,
    'the entry of a login limited to it is gone'
);
select is(runlane_test.rows_mentioning('org-gone-eo'), '{}', 'no row of any table names the organization');
select is(runlane_test.rows_mentioning('hidden'), '{}', 'nor holds any of its text');
select is(runlane.weekly_spend('owner-of-org-kept-eo'), (select s.spend from spend_before as s), 'another organization''s spend is unchanged');
select is(
    runlane_test.rows_mentioning('kept words'), array['messages: 1', 'run_outputs: 1'], 'another organization is untouched'
);
select throws_ok(
    $$select runlane.erase_org('org-gone-eo')$$, 'RL008', 'unknown organization ''org-gone-eo''',
    'erasing again answers as for an unknown organization'
);
select throws_ok(
    $$select runlane.put_user('user-1-eo', 'org-gone-eo')$$, 'RL008', 'unknown organization ''org-gone-eo''',
    'put_user answers as for an unknown organization'
);

select * from finish();
rollback;
