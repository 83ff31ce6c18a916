-- next_slot refuses what it cannot compute with the contract's codes.
begin;
select plan(5);

select throws_ok(
    $$select runlane.next_slot('daily at 09:00', 'Mars/Olympus_Mons', now())$$,
    'RL007', null,
    'an unknown time zone raises RL007'
);
select throws_ok(
    $$select runlane.next_slot('at nine', 'UTC', now())$$,
    'RL006', null,
    'an invalid schedule raises RL006'
);
select throws_ok(
    $$select runlane.next_slot('daily at 09:00', 'UTC', null)$$,
    '22004', null,
    'a missing instant raises null_value_not_allowed'
);
select throws_ok(
    $$select runlane.next_slot('daily at 09:00', null, now())$$,
    '22004', null,
    'a missing time zone raises null_value_not_allowed'
);
select is(
    runlane.next_slot('DAILY   at 9:00', 'UTC', '2026-01-01 10:00+00'),
    '2026-01-02 09:00+00'::timestamptz,
    'case and spacing are free in the schedule given to next_slot'
);

select * from finish();
rollback;
