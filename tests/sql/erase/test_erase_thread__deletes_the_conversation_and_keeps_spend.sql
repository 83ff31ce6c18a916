-- erase_thread deletes every run of the thread with its messages, outputs, journal,
-- computer lease, idempotency keys and lock row, and nothing of another thread; the
-- charges stay as amounts without a run, so weekly_spend is unchanged; afterwards the
-- erased runs answer as runs that never existed, and erasing again erases nothing.
begin;
select plan(16);

do $$
begin
    perform runlane_test.agent('agent-et', 'org-et', 'computer-et');
    perform runlane_test.chat_turn('agent-et', 'thread-secret-et', 'first secret words', 2, interval '2 hours');
    perform runlane_test.chat_turn('agent-et', 'thread-secret-et', 'second secret words', 3, interval '1 hour');
    perform runlane_test.chat_turn('agent-et', 'thread-kept-et', 'kept words', 5, interval '1 hour');
    -- a background run that wrote into the thread (the agent's thread setting)
    insert into runlane.runs (org_id, agent_id, lane, trigger, state, thread_id, prompt, finished_at)
    values ('org-et', 'agent-et', 'background', 'manual', 'succeeded', 'thread-secret-et', 'p', now());
    insert into runlane.threads (org_id, agent_id, thread_id) values ('org-et', 'agent-et', 'thread-secret-et');
    insert into runlane.computer_leases (org_id, computer_id, run_id, fence, expires_at)
    select 'org-et', 'computer-et', min(r.run_id), 1, now() from runlane.runs as r where r.thread_id = 'thread-secret-et';
end
$$;

create temporary table erased on commit drop as
select r.run_id from runlane.runs as r where r.thread_id = 'thread-secret-et';
create temporary table spend_before on commit drop as
select runlane.weekly_spend('owner-of-org-et') as spend;

select is(runlane.erase_thread('agent-et', 'thread-secret-et'), 3, 'returns the runs erased, both lanes');
select is(runlane_test.rows_mentioning('thread-secret-et'), '{}', 'no row of any table names the thread');
select is(runlane_test.rows_mentioning('secret words'), '{}', 'no row of any table holds its text');
select is(
    (select sum(runlane_test.rows_of_run(e.run_id)) from erased as e), 0::numeric,
    'no run, message, output, journal row, charge or lease names an erased run'
);
select is(
    (select count(*) from runlane.idempotency_keys as k where k.run_id in (select e.run_id from erased as e)),
    0::bigint, 'their idempotency keys are gone'
);
select is(runlane.weekly_spend('owner-of-org-et'), (select s.spend from spend_before as s), 'the week''s spend is unchanged');
select is(
    (select sum(c.amount) from runlane.charges as c where c.run_id is null and c.owner_id = 'owner-of-org-et'),
    5::numeric, 'the erased runs'' charges stay as amounts without a run'
);
select is(
    (select sum(b.amount) from runlane.charge_buckets as b where b.owner_id = 'owner-of-org-et'),
    10::numeric, 'the buckets still sum to the ledger'
);
select is(
    runlane_test.rows_mentioning('kept words'), array['messages: 1', 'run_outputs: 1'],
    'the other thread is untouched'
);
select is(
    (select count(*) from runlane.runs as r where r.agent_id = 'agent-et'), 1::bigint,
    'only the other thread''s run is left'
);
select throws_ok(
    format('select * from runlane.run_status(%s)', (select min(e.run_id) from erased as e)),
    'RL008', format('unknown run %s', (select min(e.run_id) from erased as e)),
    'run_status answers an erased run as an unknown one'
);
select throws_ok(
    format('select * from runlane.outputs_since(%s)', (select min(e.run_id) from erased as e)),
    'RL008', null, 'outputs_since answers an erased run as an unknown one'
);
select throws_ok(
    format('select runlane.cancel_run(%s)', (select min(e.run_id) from erased as e)),
    'RL008', format('unknown run %s', (select min(e.run_id) from erased as e)),
    'cancel_run answers an erased run as an unknown one'
);
select is(runlane.erase_thread('agent-et', 'thread-secret-et'), 0, 'erasing again erases nothing');
select is(runlane.erase_thread('agent-et', 'thread-never-et'), 0, 'a thread nobody wrote to erases nothing');
select is(runlane_test.rows_mentioning('thread-never-et'), '{}', 'and leaves no lock row behind');

select * from finish();
rollback;
