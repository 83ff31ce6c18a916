-- runlane.notify_queue_holders names other backends only (never the caller's own), has no
-- query text among its columns, and refuses a limit outside 1-100 with 22023. Who it
-- names is tested with a real held transaction in tests/runner/test_notify_fast_scan.py.
begin;
select plan(6);

select is(
    (
        select count(*)::int from runlane.notify_queue_holders(100) as h
        where h.pid = pg_backend_pid()
    ),
    0,
    'the caller''s own backend, in a transaction here, is never named'
);
select ok(
    (select count(*) from runlane.notify_queue_holders(1)) <= 1,
    'at most p_limit rows'
);
select ok(
    array['pid', 'login', 'application', 'xact_age_s'] <@ (
        select p.proargnames::text[] from pg_catalog.pg_proc as p
        where p.oid = 'runlane.notify_queue_holders(int)'::regprocedure
    ),
    'it names pid, login, application and transaction age'
);
select ok(
    not exists (
        select 1 from pg_catalog.pg_proc as p, unnest(p.proargnames) as a (arg)
        where p.oid = 'runlane.notify_queue_holders(int)'::regprocedure and a.arg ~ 'query'
    ),
    'no query text among its columns'
);
select throws_ok(
    'select * from runlane.notify_queue_holders(0)', '22023', null,
    'a limit under 1 is refused'
);
select throws_ok(
    'select * from runlane.notify_queue_holders(101)', '22023', null,
    'a limit over 100 is refused'
);

select * from finish();
rollback;
