-- A new-generation worker registers as generation 2, refreshes its row, and marks its
-- clean exit; it never counts as a blocker of the contract step.
begin;
select plan(5);

do $$ begin perform runlane.register_worker('worker-new', array['interactive']); end $$;
select is(
    (
        select generation || '/' || deliveries || '/' || array_to_string(lanes, ',') from runlane.workers
        where worker_id = 'worker-new'
    ),
    '2/direct/interactive',
    'a registered worker is generation 2 with direct deliveries and its lanes'
);
update runlane.workers set heartbeat_at = now() - interval '1 hour' where worker_id = 'worker-new';
do $$ begin perform runlane.register_worker('worker-new', array['interactive', 'background']); end $$;
select is(
    (select heartbeat_at from runlane.workers where worker_id = 'worker-new'), now(),
    'registering again refreshes the heartbeat'
);
select is(
    (select count(*) from runlane.upgrade_status() where detail like '%worker-new%'), 0::bigint,
    'a new-generation worker never blocks the contract step'
);
do $$ begin perform runlane.register_worker('worker-new', array['interactive'], true); end $$;
select isnt(
    (select stopped_at from runlane.workers where worker_id = 'worker-new'), null,
    'a clean exit is recorded'
);
select throws_ok(
    $$select runlane.register_worker('w', array['everything'])$$, '22023', null,
    'an unknown lane is refused'
);

select * from finish();
rollback;
