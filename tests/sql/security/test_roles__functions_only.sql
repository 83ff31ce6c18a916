-- runlane_api and runlane_worker do their jobs through the functions only: neither can
-- read or write tables directly, the api cannot claim or finish, the worker cannot
-- submit as a user or change settings.
begin;
select plan(14);

do $$ begin perform runlane_test.agent('agent-a', 'org-a'); end $$;

set local role runlane_api;
select throws_ok($$select * from runlane.runs$$, '42501', null, 'the api role cannot read runs directly');
select throws_ok(
    $$insert into runlane.runs (org_id, agent_id, lane, trigger) values ('org-a', 'agent-a', 'background', 'manual')$$,
    '42501', null, 'the api role cannot insert runs directly'
);
select throws_ok(
    $$update runlane.platform_settings set agent_max_concurrency = 100$$,
    '42501', null, 'the api role cannot change settings'
);
select throws_ok($$select runlane.claim_runs('w', array['background'])$$, '42501', null, 'the api role cannot claim');
select throws_ok($$select runlane.finish_run(1, 1, 'succeeded')$$, '42501', null, 'the api role cannot finish runs');
select lives_ok(
    $$select runlane.submit_message('agent-a', 'thread-1', 'hello')$$,
    'the api role submits messages through the function'
);
reset role;

set local role runlane_worker;
select throws_ok($$select * from runlane.messages$$, '42501', null, 'the worker role cannot read messages directly');
select throws_ok($$delete from runlane.runs$$, '42501', null, 'the worker role cannot delete runs directly');
select throws_ok(
    $$update runlane.platform_settings set agent_max_concurrency = 100$$,
    '42501', null, 'the worker role cannot change settings'
);
select throws_ok(
    $$select runlane.submit_message('agent-a', 'thread-1', 'hello')$$,
    '42501', null, 'the worker role cannot submit as a user'
);
select lives_ok($$select runlane.claim_runs('w', array['interactive'])$$, 'the worker role claims through the function');
reset role;

select is(
    (select count(*) from runlane.runs where state = 'running' and lease_owner = 'w'),
    1::bigint,
    'the worker role''s claim took the api role''s run'
);
select is(
    (
        select count(*) from pg_proc as p
        where
            p.pronamespace = 'runlane'::regnamespace
            and not exists (select 1 from unnest(p.proconfig) as cfg where cfg like 'search_path=%')
            -- (inlined into their callers, which pin it: test_roles__least_privilege.sql)
            and p.oid not in (
                'runlane._timing_of(runlane.runs, timestamptz)'::regprocedure,
                'runlane._agent_runs_newest_first(text, int)'::regprocedure
            )
    ),
    0::bigint,
    'every runlane function pins search_path (but the inlined _timing_of and _agent_runs_newest_first)'
);
select is(
    (
        select count(*) from pg_proc as p
        where
            p.pronamespace = 'runlane'::regnamespace
            and (p.proacl is null or array_to_string(p.proacl, ',') ~ '(^|,)=X')
    ),
    0::bigint,
    'no runlane function is executable by public'
);

select * from finish();
rollback;
