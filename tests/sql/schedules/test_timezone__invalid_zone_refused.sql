-- An invalid zone name on users or platform_settings raises RL007 and writes nothing.
begin;
select plan(9);

do $$ begin perform runlane_test.org('org-tz', 4, 'Europe/Berlin'); end $$;
do $$ begin perform runlane_test.owner('user-tz', 'org-tz', 'Asia/Kathmandu'); end $$;

select throws_ok(
    $$update runlane.users set timezone = 'Europe/Berlln' where user_id = 'user-tz'$$,
    'RL007', null,
    'a misspelt zone on a user raises RL007'
);
select throws_ok(
    $$update runlane.users set timezone = 'CEST' where user_id = 'user-tz'$$,
    'RL007', null,
    'a zone abbreviation is not a zone name'
);
select throws_ok(
    $$update runlane.users set timezone = 'UTC+3' where user_id = 'user-tz'$$,
    'RL007', null,
    'a POSIX offset string is not a zone name'
);
select is(
    (select timezone from runlane.users where user_id = 'user-tz'), 'Asia/Kathmandu',
    'the user keeps the zone it had'
);
select throws_ok(
    $$insert into runlane.users (user_id, org_id, timezone) values ('user-new', 'org-tz', 'Nowhere/Land')$$,
    'RL007', null,
    'inserting a user with an unknown zone raises RL007'
);
select is(
    (select count(*)::int from runlane.users where user_id = 'user-new'), 0,
    'the refused user was not written'
);
select throws_ok(
    $$update runlane.platform_settings set timezone = 'Mars/Olympus' where org_id = 'org-tz'$$,
    'RL007', null,
    'an unknown zone on an organization raises RL007'
);
select is(
    (select timezone from runlane.platform_settings where org_id = 'org-tz'), 'Europe/Berlin',
    'the organization keeps the zone it had'
);
select lives_ok(
    $$update runlane.users set timezone = 'Pacific/Chatham' where user_id = 'user-tz'$$,
    'a real zone name is accepted'
);

select * from finish();
rollback;
