-- parse_schedule: "every day at HH:MM" is "daily at HH:MM", case and spacing free; its
-- canonical text is the daily one and its slots are the daily one's.
begin;
select plan(5);

select is(
    runlane.parse_schedule('every day at 08:00'),
    runlane.parse_schedule('daily at 08:00'),
    '"every day at 08:00" parses exactly as "daily at 08:00"'
);
select is(
    runlane.parse_schedule('  Every  Day AT 8:05 ') ->> 'canonical',
    'daily at 08:05',
    'case and spacing are free; the canonical text is "daily at 08:05"'
);
select is(
    runlane.next_slot('every day at 02:30', 'Europe/Berlin', '2026-03-28 12:00Z'),
    runlane.next_slot('daily at 02:30', 'Europe/Berlin', '2026-03-28 12:00Z'),
    'its next slot is the daily schedule''s, across a DST change'
);
select throws_ok(
    $$select runlane.parse_schedule('every day at 24:00')$$,
    'RL006', null, 'an out-of-range time is refused as for "daily at"'
);
select throws_ok(
    $$select runlane.parse_schedule('every days at 08:00')$$,
    'RL006', null, 'only "every day at" is the daily alias'
);

select * from finish();
rollback;
