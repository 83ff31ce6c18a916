-- Names the server's zone directory lists that are no place's zone are refused with RL007
-- by every entry point that takes a zone: put_org, put_user, the users and
-- platform_settings triggers, next_slot. localtime (the host's zone), posixrules (the
-- POSIX TZ template), Factory (no local time set), and the posix/ and right/ copies of
-- the database. A link name such as US/Eastern stays a zone.
begin;
select plan(35);

do $$ begin perform runlane_test.org('org-tz', 4, 'Europe/Berlin'); end $$;
do $$ begin perform runlane_test.owner('user-tz', 'org-tz', 'Asia/Kathmandu'); end $$;

select throws_ok(
    $$select runlane.put_org('org-new', '{"timezone": "localtime"}')$$,
    'RL007', 'invalid time zone ''localtime''',
    'put_org refuses localtime as a new organization''s zone'
);
select throws_ok(
    $$select runlane.put_org('org-tz', '{"timezone": "localtime"}')$$,
    'RL007', null,
    'put_org refuses localtime as an organization''s new zone'
);
select throws_ok(
    $$select runlane.put_user('user-tz', 'org-tz', '{"timezone": "localtime"}')$$,
    'RL007', null,
    'put_user refuses localtime'
);
select throws_ok(
    $$insert into runlane.users (user_id, org_id, timezone) values ('user-new', 'org-tz', 'localtime')$$,
    'RL007', null,
    'the users trigger refuses localtime'
);
select throws_ok(
    $$update runlane.platform_settings set timezone = 'localtime' where org_id = 'org-tz'$$,
    'RL007', null,
    'the platform_settings trigger refuses localtime'
);
select throws_ok(
    $$select runlane.next_slot('daily at 09:00', 'localtime', '2026-06-01 00:00+00')$$,
    'RL007', null,
    'next_slot refuses localtime'
);
select throws_ok(
    $$select runlane.put_org('org-new', '{"timezone": "posixrules"}')$$,
    'RL007', 'invalid time zone ''posixrules''',
    'put_org refuses posixrules as a new organization''s zone'
);
select throws_ok(
    $$select runlane.put_org('org-tz', '{"timezone": "posixrules"}')$$,
    'RL007', null,
    'put_org refuses posixrules as an organization''s new zone'
);
select throws_ok(
    $$select runlane.put_user('user-tz', 'org-tz', '{"timezone": "posixrules"}')$$,
    'RL007', null,
    'put_user refuses posixrules'
);
select throws_ok(
    $$insert into runlane.users (user_id, org_id, timezone) values ('user-new', 'org-tz', 'posixrules')$$,
    'RL007', null,
    'the users trigger refuses posixrules'
);
select throws_ok(
    $$update runlane.platform_settings set timezone = 'posixrules' where org_id = 'org-tz'$$,
    'RL007', null,
    'the platform_settings trigger refuses posixrules'
);
select throws_ok(
    $$select runlane.next_slot('daily at 09:00', 'posixrules', '2026-06-01 00:00+00')$$,
    'RL007', null,
    'next_slot refuses posixrules'
);
select throws_ok(
    $$select runlane.put_org('org-new', '{"timezone": "Factory"}')$$,
    'RL007', 'invalid time zone ''Factory''',
    'put_org refuses Factory as a new organization''s zone'
);
select throws_ok(
    $$select runlane.put_org('org-tz', '{"timezone": "Factory"}')$$,
    'RL007', null,
    'put_org refuses Factory as an organization''s new zone'
);
select throws_ok(
    $$select runlane.put_user('user-tz', 'org-tz', '{"timezone": "Factory"}')$$,
    'RL007', null,
    'put_user refuses Factory'
);
select throws_ok(
    $$insert into runlane.users (user_id, org_id, timezone) values ('user-new', 'org-tz', 'Factory')$$,
    'RL007', null,
    'the users trigger refuses Factory'
);
select throws_ok(
    $$update runlane.platform_settings set timezone = 'Factory' where org_id = 'org-tz'$$,
    'RL007', null,
    'the platform_settings trigger refuses Factory'
);
select throws_ok(
    $$select runlane.next_slot('daily at 09:00', 'Factory', '2026-06-01 00:00+00')$$,
    'RL007', null,
    'next_slot refuses Factory'
);
select throws_ok(
    $$select runlane.put_org('org-new', '{"timezone": "posix/Europe/Berlin"}')$$,
    'RL007', 'invalid time zone ''posix/Europe/Berlin''',
    'put_org refuses posix/Europe/Berlin as a new organization''s zone'
);
select throws_ok(
    $$select runlane.put_org('org-tz', '{"timezone": "posix/Europe/Berlin"}')$$,
    'RL007', null,
    'put_org refuses posix/Europe/Berlin as an organization''s new zone'
);
select throws_ok(
    $$select runlane.put_user('user-tz', 'org-tz', '{"timezone": "posix/Europe/Berlin"}')$$,
    'RL007', null,
    'put_user refuses posix/Europe/Berlin'
);
select throws_ok(
    $$insert into runlane.users (user_id, org_id, timezone) values ('user-new', 'org-tz', 'posix/Europe/Berlin')$$,
    'RL007', null,
    'the users trigger refuses posix/Europe/Berlin'
);
select throws_ok(
    $$update runlane.platform_settings set timezone = 'posix/Europe/Berlin' where org_id = 'org-tz'$$,
    'RL007', null,
    'the platform_settings trigger refuses posix/Europe/Berlin'
);
select throws_ok(
    $$select runlane.next_slot('daily at 09:00', 'posix/Europe/Berlin', '2026-06-01 00:00+00')$$,
    'RL007', null,
    'next_slot refuses posix/Europe/Berlin'
);
select throws_ok(
    $$select runlane.put_org('org-new', '{"timezone": "right/Europe/Berlin"}')$$,
    'RL007', 'invalid time zone ''right/Europe/Berlin''',
    'put_org refuses right/Europe/Berlin as a new organization''s zone'
);
select throws_ok(
    $$select runlane.put_org('org-tz', '{"timezone": "right/Europe/Berlin"}')$$,
    'RL007', null,
    'put_org refuses right/Europe/Berlin as an organization''s new zone'
);
select throws_ok(
    $$select runlane.put_user('user-tz', 'org-tz', '{"timezone": "right/Europe/Berlin"}')$$,
    'RL007', null,
    'put_user refuses right/Europe/Berlin'
);
select throws_ok(
    $$insert into runlane.users (user_id, org_id, timezone) values ('user-new', 'org-tz', 'right/Europe/Berlin')$$,
    'RL007', null,
    'the users trigger refuses right/Europe/Berlin'
);
select throws_ok(
    $$update runlane.platform_settings set timezone = 'right/Europe/Berlin' where org_id = 'org-tz'$$,
    'RL007', null,
    'the platform_settings trigger refuses right/Europe/Berlin'
);
select throws_ok(
    $$select runlane.next_slot('daily at 09:00', 'right/Europe/Berlin', '2026-06-01 00:00+00')$$,
    'RL007', null,
    'next_slot refuses right/Europe/Berlin'
);
select is(
    (select count(*)::int from runlane.platform_settings where org_id = 'org-new')
    + (select count(*)::int from runlane.users where user_id = 'user-new'), 0,
    'nothing refused was written'
);
select is(
    (
        select u.timezone || ' ' || s.timezone
        from runlane.users as u
        inner join runlane.platform_settings as s on u.org_id = s.org_id
        where u.user_id = 'user-tz'
    ),
    'Asia/Kathmandu Europe/Berlin',
    'the user and the organization keep the zones they had'
);
select matches(
    runlane_test.error_hint($$select runlane.put_org('org-tz', '{"timezone": "localtime"}')$$),
    'localtime, posixrules, Factory and posix/ or right/ names are not zones',
    'the hint says which names are not zones'
);
select lives_ok(
    $$select runlane.put_user('user-tz', 'org-tz', '{"timezone": "Europe/Berlin"}')$$,
    'the plain name of a posix/ zone is accepted'
);
select is(
    runlane.next_slot('daily at 09:00', 'US/Eastern', '2026-06-01 00:00+00'),
    '2026-06-01 13:00+00'::timestamptz,
    'a backward-compatible link name (US/Eastern) stays a zone'
);

select * from finish();
rollback;
