-- next_slot takes the zones the settings triggers take (runlane._is_timezone): IANA names.
-- Abbreviations ('CEST') and POSIX strings ('UTC+3', which means UTC-3) are refused with
-- RL007, and an instant outside the years 1..9999 with 22023, not 22008 from inside.
begin;
select plan(7);

select throws_ok(
    $$select runlane.next_slot('daily at 09:00', 'CEST', '2026-06-01 00:00+00')$$,
    'RL007', null, 'an abbreviation is not a time zone'
);
select throws_ok(
    $$select runlane.next_slot('daily at 09:00', 'UTC+3', '2026-06-01 00:00+00')$$,
    'RL007', null, 'a POSIX offset string is not a time zone'
);
select throws_ok(
    $$select runlane.next_slot('daily at 09:00', 'Not/AZone', '2026-06-01 00:00+00')$$,
    'RL007', null, 'an unknown name is not a time zone'
);
select is(
    runlane.next_slot('daily at 09:00', 'Europe/Berlin', '2026-06-01 00:00+00'),
    '2026-06-01 07:00+00'::timestamptz,
    'a zone name works as before'
);
select is(
    runlane.next_slot('daily at 09:00', 'UTC', '2026-06-01 00:00+00'),
    '2026-06-01 09:00+00'::timestamptz,
    'UTC works as before'
);
select throws_ok(
    $$select runlane.next_slot('every 1 hours', 'UTC', '294276-12-31 23:59:59+00')$$,
    '22023', null, 'an instant past the year 9999 is refused with 22023'
);
select throws_ok(
    $$select runlane.next_slot('every 1 hours', 'UTC', '4713-01-01 00:00:00+00 BC')$$,
    '22023', null, 'an instant before the year 1 is refused with 22023'
);

select * from finish();
rollback;
