-- parse_schedule accepts the contract's forms, case and spacing free, and names their
-- canonical text.
begin;
select plan(15);

select
    is(
        runlane.parse_schedule(c.given) ->> 'canonical',
        c.canonical,
        format('%s is accepted as %s', quote_literal(c.given), quote_literal(c.canonical))
    )
from (
    values
    ('', ''),
    ('every 6 hours', 'every 6 hours'),
    ('Every 6 Hours', 'every 6 hours'),
    ('  every   12 hours  ', 'every 12 hours'),
    ('every hour', 'every hour'),
    ('every 1 hours', 'every hour'),
    ('every 720 hours', 'every 720 hours'),
    ('daily at 09:00', 'daily at 09:00'),
    ('Daily at 9:05', 'daily at 09:05'),
    ('daily at 00:00', 'daily at 00:00'),
    ('daily at 23:59', 'daily at 23:59'),
    ('weekly on mon,thu at 09:00', 'weekly on mon,thu at 09:00'),
    ('WEEKLY ON Thu , Mon  AT 9:00', 'weekly on mon,thu at 09:00'),
    ('weekly on sunday,monday,mon at 18:30', 'weekly on mon,sun at 18:30')
) as c (given, canonical);

select is(
    runlane.parse_schedule('weekly on mon,thu at 09:05'),
    '{"kind": "weekly", "days": ["mon", "thu"], "isodows": [1, 4], "hour": 9, "minute": 5,
      "time": "09:05", "canonical": "weekly on mon,thu at 09:05"}'::jsonb,
    'a weekly schedule parses into its days, ISO weekdays and time'
);

select * from finish();
rollback;
