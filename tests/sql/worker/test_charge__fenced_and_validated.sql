-- charge: the run's owner records spend at once (a ledger row and runs.cost, returning the
-- run's total); a fenced-out caller, an unknown run and a bad amount are refused and
-- write nothing.
begin;
select plan(21);

do $$
begin
    perform runlane_test.agent('agent-ch', 'org-ch');
    perform runlane_test.queued_run('agent-ch', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-ch'), 'worker-1');
end
$$;

select is(
    runlane.charge(runlane_test.last_run('agent-ch'), 1, 5.0),
    5.0::numeric,
    'a charge returns the run''s total'
);
select is(
    runlane.charge(runlane_test.last_run('agent-ch'), 1, 2.5),
    7.5::numeric,
    'a second charge adds to the total'
);
select is(
    runlane.charge(runlane_test.last_run('agent-ch'), 1, 0),
    7.5::numeric,
    'a zero charge returns the total unchanged'
);
select results_eq(
    $$select c.amount, c.owner_id, c.org_id, c.attempt from runlane.charges as c
      where c.run_id = runlane_test.last_run('agent-ch') order by c.charge_id$$,
    $$values (5.0::numeric, 'owner-of-org-ch'::text, 'org-ch'::text, 1), (2.5, 'owner-of-org-ch', 'org-ch', 1)$$,
    'each positive charge is one ledger row with the owner, organization and attempt; zero writes none'
);
select is(
    (select r.cost from runlane.runs as r where r.run_id = runlane_test.last_run('agent-ch')),
    7.5::numeric,
    'runs.cost is the run''s total'
);
select is(
    runlane.weekly_spend('owner-of-org-ch', now()),
    7.5::numeric,
    'the running attempt''s charges already count in the owner''s week'
);

-- Bad amounts: refused before anything is written.
select throws_ok(
    format('select runlane.charge(%s, 1, null)', runlane_test.last_run('agent-ch')),
    '22004', null, 'a null amount is refused with 22004'
);
select throws_ok(
    format('select runlane.charge(%s, 1, -0.01)', runlane_test.last_run('agent-ch')),
    '22023', 'amount -0.01 is negative', 'a negative amount is refused with 22023'
);
select throws_ok(
    format('select runlane.charge(%s, 1, ''NaN'')', runlane_test.last_run('agent-ch')),
    '22023', 'amount NaN is not a number', 'NaN is refused with 22023'
);
select throws_ok(
    format('select runlane.charge(%s, 1, ''Infinity'')', runlane_test.last_run('agent-ch')),
    '22023', 'amount Infinity is not finite', 'infinity is refused with 22023'
);
select throws_ok(
    format('select runlane.charge(%s, 1, ''-Infinity'')', runlane_test.last_run('agent-ch')),
    '22023', 'amount -Infinity is not finite', 'minus infinity is refused with 22023'
);
select is(
    runlane_test.error_hint(format('select runlane.charge(%s, 1, ''NaN'')', runlane_test.last_run('agent-ch'))),
    'Charge a finite amount, zero or more.',
    'the refusal hints at what is accepted'
);

-- Ownership: an unknown run, a stale fence, a finished run.
select throws_ok(
    'select runlane.charge(999999, 1, 1)',
    'RL008', null, 'an unknown run is refused with RL008'
);
select throws_ok(
    'select runlane.charge(null, 1, 1)',
    '22004', null, 'a null run id is refused with 22004'
);
select throws_ok(
    format('select runlane.charge(%s, null, 1)', runlane_test.last_run('agent-ch')),
    '22004', null, 'a null fence is refused with 22004'
);
do $$ begin perform runlane_test.claimed(runlane_test.last_run('agent-ch'), 'worker-2'); end $$;
select throws_ok(
    format('select runlane.charge(%s, 1, 1)', runlane_test.last_run('agent-ch')),
    'RL001', null, 'a fenced-out owner is refused with RL001'
);
select is(
    runlane.charge(runlane_test.last_run('agent-ch'), 2, 1),
    8.5::numeric,
    'the new owner charges on the same total'
);
select lives_ok(
    format('select runlane.finish_run(%s, 2, ''succeeded'')', runlane_test.last_run('agent-ch')),
    'the run finishes'
);
select throws_ok(
    format('select runlane.charge(%s, 2, 1)', runlane_test.last_run('agent-ch')),
    'RL001', null, 'a finished run takes no more charges (RL001)'
);

select results_eq(
    $$select count(*), sum(c.amount) from runlane.charges as c
      where c.run_id = runlane_test.last_run('agent-ch')$$,
    $$values (3::bigint, 8.5::numeric)$$,
    'no refused call wrote a ledger row'
);
select is(
    (select r.cost from runlane.runs as r where r.run_id = runlane_test.last_run('agent-ch')),
    8.5::numeric,
    'no refused call changed runs.cost'
);

select * from finish();
rollback;
