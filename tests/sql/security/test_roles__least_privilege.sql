-- Least privilege, checked exhaustively from the catalogs rather than on a sample:
-- neither client role holds any privilege on any runlane table, column or sequence;
-- runlane_api executes exactly its functions and no worker or maintenance function;
-- runlane_worker cannot submit as a user or press "Run now"; no function writes the
-- settings, so no role can change them; every function pins search_path (but
-- _timing_of and _agent_runs_newest_first, inlined into their pinned callers, which no
-- role can call), and every security definer function pins it to exactly pg_catalog,
-- pg_temp; each role can really call what it is granted (no private helper behind an
-- invoker function).
begin;
select plan(18);

-- GUARD: the checks below are over every relation, not a sample (and not vacuous).
select cmp_ok(
    (select count(*) from information_schema.tables where table_schema = 'runlane'),
    '>=',
    9::bigint,
    'the runlane schema has its tables, so the checks over all of them are not vacuous'
);

select is(
    (
        select array_agg(format('%s %s %s', r.rolname, t.table_name, p.privilege) order by 1)
        from information_schema.tables as t
        cross join (values ('runlane_api'), ('runlane_worker')) as r (rolname)
        cross join (
            values ('select'), ('insert'), ('update'), ('delete'), ('truncate'), ('references'), ('trigger')
        ) as p (privilege)
        where
            t.table_schema = 'runlane'
            and has_table_privilege(
                r.rolname, format('%I.%I', t.table_schema, t.table_name)::regclass, p.privilege
            )
    ),
    null,
    'neither the api nor the worker role holds any privilege on any runlane table or view'
);

select is(
    (
        select array_agg(format('%s %s %s', r.rolname, t.table_name, p.privilege) order by 1)
        from information_schema.tables as t
        cross join (values ('runlane_api'), ('runlane_worker')) as r (rolname)
        cross join (values ('select'), ('insert'), ('update'), ('references')) as p (privilege)
        where
            t.table_schema = 'runlane'
            and has_any_column_privilege(
                r.rolname, format('%I.%I', t.table_schema, t.table_name)::regclass, p.privilege
            )
    ),
    null,
    'neither role holds a privilege on any column of any runlane table'
);

select is(
    (
        select array_agg(format('%s %s %s', r.rolname, c.relname, p.privilege) order by 1)
        from pg_class as c
        cross join (values ('runlane_api'), ('runlane_worker')) as r (rolname)
        cross join (values ('usage'), ('select'), ('update')) as p (privilege)
        where
            c.relnamespace = 'runlane'::regnamespace
            and c.relkind = 'S'
            and has_sequence_privilege(r.rolname, c.oid, p.privilege)
    ),
    null,
    'neither role may read or advance any runlane sequence'
);

select ok(
    not has_schema_privilege('runlane_api', 'runlane', 'create')
    and not has_schema_privilege('runlane_worker', 'runlane', 'create'),
    'neither role may create objects in the runlane schema'
);

select is(
    (
        select array_agg(r.rolname::text order by r.rolname)
        from pg_roles as r
        where
            r.rolname in ('runlane_api', 'runlane_worker')
            and (
                r.rolsuper or r.rolbypassrls or r.rolcreaterole or r.rolcreatedb
                or exists (select 1 from pg_auth_members as m where m.member = r.oid)
            )
    ),
    null,
    'neither role is a superuser, bypasses row security, creates roles or databases, or is a member of another role'
);

-- The api role: exactly the client functions, nothing of the worker or maintenance.
-- parse_schedule, next_slot and weekly_spend are read-only queries a product UI needs
-- (validate the schedule an owner types, show its next slot, show the week's spend);
-- stream_token names a run's runlane_outputs hints for a reader allowed to read the run;
-- the operator views (lane_status, org_status, agent_schedules, timing_summary,
-- agent_journal) are what an application reads about its agents and runs, each limited to
-- the login's organization when it is scoped; so is run_detail (one run with its error);
-- and so are the dashboard's views (lane_minutes, queue_delay_status, owner_spend,
-- agent_last_runs, lane_overview, agent_page, runs_page, workers_page, failure_minutes,
-- run_reply, unserved_handlers).
select set_eq(
    $$
        select p.proname::text
        from pg_proc as p
        where p.pronamespace = 'runlane'::regnamespace
          and has_function_privilege('runlane_api', p.oid, 'execute')
    $$,
    array[
        'submit_message', 'send_message', 'publish_run', 'create_run', 'run_now', 'outputs_since', 'run_timing',
        'parse_schedule', 'next_slot', 'weekly_spend', 'stream_token', 'cancel_run', 'run_status',
        'put_org', 'put_user', 'put_agent',
        'erase_thread', 'erase_agent', 'erase_user', 'erase_org',
        'get_agent', 'message_status',
        'lane_status', 'org_status', 'agent_schedules', 'timing_summary', 'agent_journal',
        'superseded_through', 'run_detail',
        'lane_minutes', 'queue_delay_status', 'owner_spend', 'agent_last_runs',
        'lane_overview', 'agent_page', 'unserved_handlers',
        'runs_page', 'workers_page', 'failure_minutes', 'run_reply',
        -- a stream follower reads it to poll fast while notifications cannot be trusted
        'notify_queue_usage',
        -- one read of the new outputs of every stream a burst of hints named
        'outputs_since_many',
        -- on Citus, the node an organization's calls go to in one hop
        'org_node'
    ],
    'the api role executes exactly the client functions'
);

select is(
    (
        select array_agg(p.proname::text order by p.proname)
        from pg_proc as p
        where
            p.pronamespace = 'runlane'::regnamespace
            and has_function_privilege('runlane_api', p.oid, 'execute')
            and p.proname in (
                'claim_runs', 'heartbeat', 'append_output', 'append_outputs', 'save_checkpoint', 'take_steering',
                'run_messages',
                'finish_run', 'release_run', 'retry_run', 'tick', 'reap_stale', 'cancel_redundant_timer_runs',
                'queue_delay', 'drain_legacy_deliveries', 'upgrade_status'
            )
    ),
    null,
    'the api role executes no worker or maintenance function'
);

select is(
    (
        select array_agg(p.proname::text order by p.proname)
        from pg_proc as p
        where
            p.pronamespace = 'runlane'::regnamespace
            and has_function_privilege('runlane_worker', p.oid, 'execute')
            and p.proname in (
                'submit_message', 'send_message', 'run_now', 'cancel_run', 'put_org', 'put_user', 'put_agent',
                'outputs_since', 'outputs_since_many', 'run_detail', 'run_reply',
                'erase_thread', 'erase_agent', 'erase_user', 'erase_org'
            )
    ),
    null,
    'the worker role cannot submit a message as a user, press Run now or Stop, manage or erase agents, '
    || 'nor read a run''s outputs or error text'
);

select is(
    (
        select array_agg(p.proname::text order by p.proname)
        from pg_proc as p
        where
            p.pronamespace = 'runlane'::regnamespace
            and (
                has_function_privilege('runlane_api', p.oid, 'execute')
                or has_function_privilege('runlane_worker', p.oid, 'execute')
            )
            and (p.proname like '\_%' or p.proname like 'tg\_%')
    ),
    null,
    'no private helper or trigger function is executable by either role'
);

-- Settings (platform_settings, users, the agents' switches, model and schedule) change
-- only through the management functions put_org, put_user and put_agent (runlane_api),
-- are deleted only by erasure (erase_user, erase_org, and _erase_agents behind
-- erase_agent), or by the owner's direct table writes; no other function writes them.
select is(
    (
        select array_agg(p.proname::text order by p.proname)
        from pg_proc as p
        where
            p.pronamespace = 'runlane'::regnamespace
            and (
                p.prosrc ~* '(update|insert\s+into|delete\s+from|truncate)\s+(table\s+)?runlane\.(platform_settings|users)\M'
                or p.prosrc ~* '(insert\s+into|delete\s+from|truncate)\s+(table\s+)?runlane\.agents\M'
                or p.prosrc ~* 'update\s+runlane\.agents\M[^;]*\m(enabled|admin_locked|model|prompt|schedule|schedule_anchor)\s*='
            )
    ),
    array['_erase_agents', 'erase_org', 'erase_user', 'put_agent', 'put_org', 'put_user'],
    'only put_org, put_user, put_agent and erasure write the settings: other functions update agents only in next_run_at'
);

select is(
    (
        select array_agg(p.oid::regprocedure::text order by p.oid::regprocedure::text)
        from pg_proc as p
        where
            p.pronamespace = 'runlane'::regnamespace
            and not exists (
                select 1 from unnest(p.proconfig) as cfg
                where
                    cfg like 'search\_path=%' and cfg not like 'search\_path=%$user%'
                    and cfg not like 'search\_path=%public%'
            )
    ),
    array[
        'runlane._agent_runs_newest_first(text,integer)',
        'runlane._timing_of(runlane.runs,timestamp with time zone)'
    ],
    'every runlane function pins a search_path without $user or public, but two inlined helpers'
);

-- _timing_of and _agent_runs_newest_first pin none so that they are inlined into their
-- callers' statements (a SQL function with a SET clause never is): they must stay
-- invoker SQL functions that only runlane's own functions, all pinned, can call.
select is(
    (
        select array_agg(array[l.lanname::text, p.prosecdef::text] order by p.oid)
        from pg_proc as p
        inner join pg_language as l on p.prolang = l.oid
        where p.oid in (
            'runlane._timing_of(runlane.runs, timestamptz)'::regprocedure,
            'runlane._agent_runs_newest_first(text, int)'::regprocedure
        )
    ),
    array[array['sql', 'false'], array['sql', 'false']],
    'the functions without a pinned search_path are invoker SQL functions'
);
select ok(
    not exists (
        select 1
        from
            unnest(array[
                'runlane._timing_of(runlane.runs, timestamptz)'::regprocedure,
                'runlane._agent_runs_newest_first(text, int)'::regprocedure
            ]) as f (oid)
        cross join unnest(array['runlane_api', 'runlane_worker', 'public']) as r (role_name)
        where has_function_privilege(r.role_name, f.oid, 'execute')
    ),
    'and no client role can call them'
);

select is(
    (
        select array_agg(p.oid::regprocedure::text order by p.oid::regprocedure::text)
        from pg_proc as p
        where
            p.pronamespace = 'runlane'::regnamespace
            and p.prosecdef
            and not 'search_path=pg_catalog, pg_temp' = any(coalesce(p.proconfig, '{}'))
    ),
    null,
    'every security definer function pins search_path to exactly pg_catalog, pg_temp'
);

select cmp_ok(
    (select count(*) from pg_proc as p where p.pronamespace = 'runlane'::regnamespace and p.prosecdef),
    '>=',
    20::bigint,
    'the public functions are security definer (the pinned-path check above covers them all)'
);

-- Granted is not enough: an invoker function that calls a private helper or reads a
-- table fails for the role with 42501. Each role calls its pure schedule functions.
set local role runlane_api;
select lives_ok(
    $$select runlane.parse_schedule('daily at 09:00'), runlane.next_slot('daily at 09:00', 'UTC', now())$$,
    'the api role can really call parse_schedule and next_slot'
);
reset role;
set local role runlane_worker;
select lives_ok(
    $$select runlane.parse_schedule('every 6 hours'), runlane.next_slot('every 6 hours', 'UTC', now())$$,
    'the worker role can really call parse_schedule and next_slot'
);
reset role;

select * from finish();
rollback;
