-- next_slot reads "weekly at HH:MM" as set at p_after (p_after's weekday in the zone) and
-- keeps the wall-clock time across both DST changes in Europe/Berlin and America/New_York:
-- a nonexistent time fires after the gap, an ambiguous one at its first instance.
begin;
select plan(9);

select
    is(
        runlane.next_slot(c.schedule, c.zone, c.after),
        c.expected,
        format('%s in %s after %s', quote_literal(c.schedule), c.zone, c.after)
    )
from (
    values
    -- Berlin, set Sunday 11:00 CET: next Sunday 09:00 CEST (07:00 UTC, an hour earlier in UTC)
    ('weekly at 09:00', 'Europe/Berlin', '2026-03-22 10:00+00'::timestamptz, '2026-03-29 07:00+00'::timestamptz),
    -- Berlin, set Sunday 10:00 CEST: next Sunday 09:00 CET (08:00 UTC)
    ('weekly at 09:00', 'Europe/Berlin', '2026-10-18 08:00+00'::timestamptz, '2026-10-25 08:00+00'::timestamptz),
    -- Berlin, 02:30 does not exist on 2026-03-29: 03:30 CEST
    ('weekly at 02:30', 'Europe/Berlin', '2026-03-22 10:00+00'::timestamptz, '2026-03-29 01:30+00'::timestamptz),
    -- Berlin, 02:30 happens twice on 2026-10-25: the first, CEST
    ('weekly at 02:30', 'Europe/Berlin', '2026-10-18 08:00+00'::timestamptz, '2026-10-25 00:30+00'::timestamptz),
    -- New York, set Sunday 10:00 EST: next Sunday 09:00 EDT (13:00 UTC)
    ('weekly at 09:00', 'America/New_York', '2026-03-01 15:00+00'::timestamptz, '2026-03-08 13:00+00'::timestamptz),
    -- New York, set Sunday 10:00 EDT: next Sunday 09:00 EST (14:00 UTC)
    ('weekly at 09:00', 'America/New_York', '2026-10-25 14:00+00'::timestamptz, '2026-11-01 14:00+00'::timestamptz),
    -- New York, 02:30 does not exist on 2026-03-08: 03:30 EDT
    ('weekly at 02:30', 'America/New_York', '2026-03-01 15:00+00'::timestamptz, '2026-03-08 07:30+00'::timestamptz),
    -- New York, 01:30 happens twice on 2026-11-01: the first, EDT
    ('weekly at 01:30', 'America/New_York', '2026-10-25 14:00+00'::timestamptz, '2026-11-01 05:30+00'::timestamptz),
    -- New York, Saturday 22:00 EST (UTC already Sunday): the Saturday after, 09:00 EDT
    ('weekly at 09:00', 'America/New_York', '2026-03-08 03:00+00'::timestamptz, '2026-03-14 13:00+00'::timestamptz)
) as c (schedule, zone, after, expected);

select * from finish();
rollback;
