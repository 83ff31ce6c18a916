-- A run claimed again (after a requeue) gets a newer fence and attempt; its first start
-- time is kept.
begin;
select plan(3);

do $$ begin perform runlane_test.agent('agent-a', 'org-a'); end $$;
create temp table r on commit drop as select runlane_test.queued_run('agent-a', 'interactive', 'interactive') as id;
do $$ begin perform runlane.claim_runs('w1', array['interactive']); end $$;
create temp table first on commit drop as
select first_started_at from runlane.runs where run_id = (select id from r);

update runlane.runs set state = 'queued', lease_owner = null, lease_expires_at = null
where run_id = (select id from r);

create temp table second_claim on commit drop as
select * from runlane.claim_runs('w2', array['interactive']);

select is((select fence from second_claim), 2::bigint, 'the second claim hands out fence 2');
select is((select attempt from second_claim), 2, 'the second claim is attempt 2');
select is(
    (select first_started_at from runlane.runs where run_id = (select id from r)),
    (select first_started_at from first),
    'first_started_at is set once and kept'
);

select * from finish();
rollback;
