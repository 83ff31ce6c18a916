-- Every new organization gets its claim lock row (runlane.org_claim_locks, the row
-- claim_runs locks to serialize its background claims), through put_org or any insert;
-- put_org on an existing organization adds nothing.
begin;
select plan(3);

select runlane.put_org('org-new');

select is(
    (select count(*) from runlane.org_claim_locks where org_id = 'org-new'),
    1::bigint,
    'put_org of a new organization adds its row'
);

select runlane.put_org('org-new', '{"agent_max_concurrency": 2}');

select is(
    (select count(*) from runlane.org_claim_locks where org_id = 'org-new'),
    1::bigint,
    'put_org of an existing one adds nothing'
);

insert into runlane.platform_settings (org_id) values ('org-inserted');

select is(
    (select count(*) from runlane.org_claim_locks where org_id = 'org-inserted'),
    1::bigint,
    'a plain insert adds its row too'
);

select * from finish();
rollback;
