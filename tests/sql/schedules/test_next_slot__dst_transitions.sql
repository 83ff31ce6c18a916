-- next_slot over the 2026 DST transitions of Berlin, New York, Lord Howe (half-hour
-- DST), Kathmandu (+05:45) and Chatham (+12:45/+13:45): both directions, daily and
-- weekly, and intervals across DST. Expected instants were computed independently
-- (Python zoneinfo, fold=0: the first instance; a gap time read with the offset before it).
begin;
select plan(30);

select
    is(
        runlane.next_slot(c.schedule, c.zone, c.after_at),
        c.expected,
        c.description
    )
from (
    values
    (
        'daily at 02:30', 'Europe/Berlin', '2026-03-28 12:00+00'::timestamptz, '2026-03-29 01:30+00'::timestamptz,
        'Berlin spring forward: 02:30 does not exist and fires at 03:30 CEST'
    ),
    (
        'daily at 09:00', 'Europe/Berlin', '2026-03-28 08:00+00'::timestamptz, '2026-03-29 07:00+00'::timestamptz,
        'Berlin: 09:00 the day after spring forward is 07:00 UTC'
    ),
    (
        'daily at 02:30', 'Europe/Berlin', '2026-10-24 12:00+00'::timestamptz, '2026-10-25 00:30+00'::timestamptz,
        'Berlin fall back: ambiguous 02:30 fires at its first instance, 00:30 UTC'
    ),
    (
        'daily at 02:30', 'Europe/Berlin', '2026-10-25 00:30+00'::timestamptz, '2026-10-26 01:30+00'::timestamptz,
        'Berlin fall back: the second 02:30 does not fire again, next is the 26th'
    ),
    (
        'weekly on sun at 02:30', 'Europe/Berlin', '2026-03-22 12:00+00'::timestamptz, '2026-03-29 01:30+00'::timestamptz,
        'Berlin weekly Sunday 02:30 on spring-forward day fires at 03:30 CEST'
    ),
    (
        'weekly on sun at 02:30', 'Europe/Berlin', '2026-10-18 12:00+00'::timestamptz, '2026-10-25 00:30+00'::timestamptz,
        'Berlin weekly Sunday 02:30 on fall-back day fires at the first instance'
    ),
    (
        'every 6 hours', 'Europe/Berlin', '2026-03-29 00:00+00'::timestamptz, '2026-03-29 06:00+00'::timestamptz,
        'Berlin interval across spring forward: exactly 6 elapsed hours'
    ),
    (
        'every 6 hours', 'Europe/Berlin', '2026-10-25 00:00+00'::timestamptz, '2026-10-25 06:00+00'::timestamptz,
        'Berlin interval across fall back: exactly 6 elapsed hours'
    ),
    (
        'daily at 02:30', 'America/New_York', '2026-03-07 12:00+00'::timestamptz, '2026-03-08 07:30+00'::timestamptz,
        'New York spring forward: 02:30 fires at 03:30 EDT'
    ),
    (
        'daily at 01:30', 'America/New_York', '2026-10-31 12:00+00'::timestamptz, '2026-11-01 05:30+00'::timestamptz,
        'New York fall back: ambiguous 01:30 fires at its first (EDT) instance'
    ),
    (
        'daily at 01:30', 'America/New_York', '2026-11-01 05:30+00'::timestamptz, '2026-11-02 06:30+00'::timestamptz,
        'New York fall back: the EST 01:30 does not fire again'
    ),
    (
        'weekly on sun at 02:00', 'America/New_York', '2026-03-01 12:00+00'::timestamptz, '2026-03-08 07:00+00'::timestamptz,
        'New York weekly 02:00 on spring-forward day fires at 03:00 EDT'
    ),
    (
        'weekly on sun,mon at 01:15', 'America/New_York', '2026-10-31 12:00+00'::timestamptz, '2026-11-01 05:15+00'::timestamptz,
        'New York weekly 01:15 on fall-back day fires at the first instance'
    ),
    (
        'every 24 hours', 'America/New_York', '2026-11-01 00:00+00'::timestamptz, '2026-11-02 00:00+00'::timestamptz,
        'New York interval across fall back: exactly 24 elapsed hours'
    ),
    (
        'daily at 02:15', 'Australia/Lord_Howe', '2026-10-03 12:00+00'::timestamptz, '2026-10-03 15:45+00'::timestamptz,
        'Lord Howe half-hour spring forward: 02:15 fires at 02:45 (+11)'
    ),
    (
        'weekly on sun at 02:00', 'Australia/Lord_Howe', '2026-09-28 00:00+00'::timestamptz, '2026-10-03 15:30+00'::timestamptz,
        'Lord Howe weekly 02:00 in the half-hour gap fires at 02:30 (+11)'
    ),
    (
        'daily at 01:45', 'Australia/Lord_Howe', '2026-04-04 12:00+00'::timestamptz, '2026-04-04 14:45+00'::timestamptz,
        'Lord Howe half-hour fall back: ambiguous 01:45 fires at its first (+11) instance'
    ),
    (
        'daily at 01:45', 'Australia/Lord_Howe', '2026-04-04 14:45+00'::timestamptz, '2026-04-05 15:15+00'::timestamptz,
        'Lord Howe fall back: the second 01:45 does not fire again'
    ),
    (
        'weekly on sun at 01:45', 'Australia/Lord_Howe', '2026-03-30 00:00+00'::timestamptz, '2026-04-04 14:45+00'::timestamptz,
        'Lord Howe weekly Sunday 01:45 on fall-back day fires at the first instance'
    ),
    (
        'every 3 hours', 'Australia/Lord_Howe', '2026-04-04 15:00+00'::timestamptz, '2026-04-04 18:00+00'::timestamptz,
        'Lord Howe interval across fall back: exactly 3 elapsed hours'
    ),
    (
        'daily at 09:00', 'Asia/Kathmandu', '2026-06-01 00:00+00'::timestamptz, '2026-06-01 03:15+00'::timestamptz,
        'Kathmandu +05:45: 09:00 is 03:15 UTC'
    ),
    (
        'daily at 00:10', 'Asia/Kathmandu', '2026-06-01 18:30+00'::timestamptz, '2026-06-02 18:25+00'::timestamptz,
        'Kathmandu +05:45: 00:10 local is 18:25 UTC the day before'
    ),
    (
        'weekly on fri at 23:50', 'Asia/Kathmandu', '2026-06-01 00:00+00'::timestamptz, '2026-06-05 18:05+00'::timestamptz,
        'Kathmandu weekly Friday 23:50 is 18:05 UTC'
    ),
    (
        'daily at 03:00', 'Pacific/Chatham', '2026-09-26 12:00+00'::timestamptz, '2026-09-26 14:15+00'::timestamptz,
        'Chatham spring forward (+12:45 -> +13:45): 03:00 fires at 04:00'
    ),
    (
        'daily at 03:00', 'Pacific/Chatham', '2026-04-04 12:00+00'::timestamptz, '2026-04-04 13:15+00'::timestamptz,
        'Chatham fall back: ambiguous 03:00 fires at its first (+13:45) instance'
    ),
    (
        'daily at 03:00', 'Pacific/Chatham', '2026-04-04 13:15+00'::timestamptz, '2026-04-05 14:15+00'::timestamptz,
        'Chatham fall back: the second 03:00 does not fire again'
    ),
    (
        'weekly on sun at 03:30', 'Pacific/Chatham', '2026-09-21 00:00+00'::timestamptz, '2026-09-26 14:45+00'::timestamptz,
        'Chatham weekly Sunday 03:30 in the gap fires at 04:30 (+13:45)'
    ),
    (
        'daily at 09:00', 'Europe/Berlin', '2026-07-01 07:00+00'::timestamptz, '2026-07-02 07:00+00'::timestamptz,
        'a slot exactly at p_after is not strictly after it: the next day'
    )
) as c (schedule, zone, after_at, expected, description);

select is(
    runlane.next_slot('', 'Europe/Berlin', '2026-03-28 12:00+00'),
    null,
    'a manual schedule has no next slot'
);
select is(
    runlane.next_slot('every 6 hours', 'UTC', runlane.next_slot('every 6 hours', 'UTC', '2026-03-29 00:30+00'))
    - runlane.next_slot('every 6 hours', 'UTC', '2026-03-29 00:30+00'),
    interval '6 hours',
    'consecutive interval slots are exactly N hours apart'
);

select * from finish();
rollback;
