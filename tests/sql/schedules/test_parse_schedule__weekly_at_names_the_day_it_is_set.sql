-- "weekly at HH:MM" (the calendar slot the requirements name) is accepted: it is the weekly schedule on
-- the weekday on which it is set, in the schedule's zone, and its canonical text names
-- that day. Instants around both DST changes in Europe/Berlin and America/New_York, where
-- the local day differs from the UTC day.
begin;
select plan(12);

select
    is(
        runlane._parse_schedule(c.given, c.zone, c.set_at) ->> 'canonical',
        c.canonical,
        format('%s set at %s in %s is %s', quote_literal(c.given), c.set_at, c.zone, quote_literal(c.canonical))
    )
from (
    values
    -- Berlin: Monday 01:30 CEST just after spring forward, UTC still Sunday
    ('Weekly  AT 9:00', 'Europe/Berlin', '2026-03-29 23:30+00'::timestamptz, 'weekly on mon at 09:00'),
    -- Berlin: during the spring-forward Sunday itself (03:30 CEST)
    ('weekly at 09:00', 'Europe/Berlin', '2026-03-29 01:30+00'::timestamptz, 'weekly on sun at 09:00'),
    -- Berlin: Monday 00:30 CET just after fall back, UTC still Sunday
    ('weekly at 18:05', 'Europe/Berlin', '2026-10-25 23:30+00'::timestamptz, 'weekly on mon at 18:05'),
    -- New York: Saturday 22:00 EST, the evening before spring forward; UTC already Sunday
    ('weekly at 09:00', 'America/New_York', '2026-03-08 03:00+00'::timestamptz, 'weekly on sat at 09:00'),
    -- New York: Saturday 23:30 EDT, the evening before fall back; UTC already Sunday
    ('weekly at 7:45', 'America/New_York', '2026-11-01 03:30+00'::timestamptz, 'weekly on sat at 07:45'),
    -- New York: Sunday 01:30 EST, the second pass of the repeated hour
    ('weekly at 07:45', 'America/New_York', '2026-11-01 06:30+00'::timestamptz, 'weekly on sun at 07:45')
) as c (given, zone, set_at, canonical);

select is(
    runlane._parse_schedule('weekly at 09:00', 'America/New_York', '2026-03-08 03:00+00'),
    runlane.parse_schedule('weekly on sat at 09:00'),
    'the spec of "weekly at" is exactly the spec of its canonical text'
);

select is(
    runlane.parse_schedule('weekly at 09:00') ->> 'canonical',
    'weekly on ' || to_char(now() at time zone 'UTC', 'dy') || ' at 09:00',
    'parse_schedule alone, without an agent or zone, names today''s weekday in UTC'
);

-- Set through the agents table: the trigger resolves the day in the agent's zone now.
do $$
begin
    perform runlane_test.scheduled_agent('agent-wb', 'weekly at 09:00', 'Europe/Berlin');
    perform runlane_test.scheduled_agent('agent-wn', 'Weekly at 7:45', null, 'America/New_York', 'org-ny');
end $$;

select is(
    (select schedule from runlane.agents where agent_id = 'agent-wb'),
    'weekly on ' || to_char(now() at time zone 'Europe/Berlin', 'dy') || ' at 09:00',
    'an owner in Berlin setting "weekly at 09:00" stores the weekly schedule on today''s weekday in Berlin'
);

select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-wb'),
    runlane.next_slot(
        'weekly on ' || to_char(now() at time zone 'Europe/Berlin', 'dy') || ' at 09:00', 'Europe/Berlin', now()
    ),
    'its next_run_at is the next 09:00 Berlin time on that weekday'
);

select is(
    (select schedule from runlane.agents where agent_id = 'agent-wn'),
    'weekly on ' || to_char(now() at time zone 'America/New_York', 'dy') || ' at 07:45',
    'an owner of an organization in New York gets today''s weekday in New York'
);

select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-wn'),
    runlane.next_slot(
        'weekly on ' || to_char(now() at time zone 'America/New_York', 'dy') || ' at 07:45',
        'America/New_York', now()
    ),
    'and the next 07:45 New York time on that weekday'
);

select * from finish();
rollback;
