-- The worker's claim (keyed, six arguments, p_report_skipped true) returns the runs it
-- ended skipped because a gate closed between queue and claim, after the claimed runs,
-- with skipped_reason set, so the worker can log run.skipped with run.reason; a resend of
-- the same claim key reports them again. The four- and five-argument forms return claimed
-- runs only (the contract's shape).
begin;
select plan(9);

do $$
begin
    perform runlane_test.agent('r-' || i) from generate_series(1, 4) as i;
    perform runlane_test.queued_run('r-' || i) from generate_series(1, 2) as i;
    update runlane.agents set admin_locked = true where agent_id = 'r-2';
end
$$;

create temp table first_reply on commit drop as
select
    c.*,
    row_number() over () as position
from runlane.claim_runs(
    'worker-r', array['background'], 5, '60 seconds',
    '00000000-0000-4000-8000-000000000001', true
) as c;

select results_eq(
    'select agent_id, skipped_reason, fence, attempt from first_reply order by position',
    $$values ('r-1'::text, null::text, 1::bigint, 1::int), ('r-2', 'agent_locked', 0, 0)$$,
    'the claimed run first, then the skipped run with its reason and its fence and attempts unchanged'
);
select results_eq(
    $$select prompt, checkpoint, iteration_cap, late_notice, timing
      from first_reply where skipped_reason is not null$$,
    $$values (null::text, null::jsonb, null::int, null::jsonb, null::jsonb)$$,
    'a skipped row carries no prompt, checkpoint, iteration cap, late notice or timing'
);
select isnt(
    (select timing from first_reply where skipped_reason is null),
    null,
    'the claimed row keeps its timing row'
);

select results_eq(
    $$select agent_id, skipped_reason, fence
      from runlane.claim_runs('worker-r', array['background'], 5, '60 seconds',
                              '00000000-0000-4000-8000-000000000001', true)$$,
    'select agent_id, skipped_reason, fence from first_reply order by position',
    'a resend with the same claim key returns the same claimed and skipped rows'
);
select is(
    (select count(*) from runlane.run_events where event = 'run.skipped'),
    1::bigint,
    'the resend skipped nothing twice'
);

-- The five-argument form: claimed rows only, the skip still happens.
do $$
begin
    perform runlane_test.queued_run('r-3');
    update runlane.agents set enabled = false where agent_id = 'r-3';
end
$$;
select is(
    (select count(
        *) from runlane.claim_runs(
        'worker-r', array['background'], 5, '60 seconds',
        '00000000-0000-4000-8000-000000000002'
    )),
    0::bigint,
    'the five-argument form returns no row for a skipped run'
);
select is(
    (select reason from runlane.runs where agent_id = 'r-3'),
    'agent_off',
    'the five-argument form skipped it all the same'
);

-- Without p_report_skipped: claimed rows only.
do $$
begin
    perform runlane_test.queued_run('r-4');
    update runlane.agents set model = null where agent_id = 'r-4';
end
$$;
select is(
    (select count(
        *) from runlane.claim_runs(
        'worker-r', array['background'], 5, '60 seconds',
        null, false
    )),
    0::bigint,
    'p_report_skipped false returns no row for a skipped run'
);

select throws_ok(
    $$select * from runlane.claim_runs('worker-r', array['background'], 5, '60 seconds', null, null)$$,
    '22004',
    null,
    'a null p_report_skipped is refused'
);

select * from finish();
rollback;
