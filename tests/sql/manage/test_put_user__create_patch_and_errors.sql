-- put_user creates a user in an organization, patches the zone (null = the
-- organization's), and refuses unknown organizations, a user of another organization,
-- bad zones and bad keys.
begin;
select plan(10);

do $$ begin perform runlane.put_org('org-u'); perform runlane.put_org('org-v'); end $$;

select is((runlane.put_user('u-1', 'org-u')).timezone, null, 'a new user follows the organization''s zone');
select is((runlane.put_user('u-1', 'org-u', '{"timezone": "Asia/Tokyo"}')).timezone, 'Asia/Tokyo', 'zone set');
select is((runlane.put_user('u-1', 'org-u')).timezone, 'Asia/Tokyo', 'an absent key keeps the zone');
select is((runlane.put_user('u-1', 'org-u', '{"timezone": null}')).timezone, null, 'null clears it');
select is((runlane.put_user('u-2', 'org-u', '{"timezone": "UTC"}')).org_id, 'org-u', 'created with a zone');
select throws_ok(
    $$select runlane.put_user('u-3', 'org-nowhere')$$, 'RL008', 'unknown organization ''org-nowhere''',
    'an unknown organization raises RL008'
);
select throws_ok(
    $$select runlane.put_user('u-1', 'org-v')$$, '23505', 'user id ''u-1'' is taken',
    'a user never moves to another organization: its id is taken there (and nothing more is said)'
);
select throws_ok(
    $$select runlane.put_user('u-1', 'org-u', '{"timezone": "CEST"}')$$, 'RL007', null,
    'an abbreviation is not a zone'
);
select throws_ok(
    $$select runlane.put_user('u-1', 'org-u', '{"timezone": 3}')$$, '22023',
    'key ''timezone'' of the user patch must be string or null, got number',
    'a wrong type names the key'
);
select is((select org_id from runlane.users where user_id = 'u-1'), 'org-u', 'the user stayed');

select * from finish();
rollback;
