-- _late_notice: a marked timer run started more than 15 minutes after its occurrence
-- gets both times in the routine's zone; exactly 15 minutes is on time.
begin;
select plan(6);

do $$ begin perform runlane_test.agent('agent-late'); end $$;
do $$ begin perform runlane_test.queued_run('agent-late', 'background', 'scheduled'); end $$;
update runlane.runs
set
    timer_routine = 'agent-late',
    timer_occurrence = '2026-03-29 07:00+00',
    timer_timezone = 'Europe/Berlin';

update runlane.runs set first_started_at = '2026-03-29 07:15+00';
select is(
    runlane._late_notice(runlane_test.run_of(runlane_test.last_run('agent-late'))), null,
    'a timer run started exactly 15 minutes after its occurrence is on time'
);

update runlane.runs set first_started_at = '2026-03-29 07:15:00.001+00';
select isnt(
    runlane._late_notice(runlane_test.run_of(runlane_test.last_run('agent-late'))), null,
    'a timer run started just over 15 minutes late gets a notice'
);

update runlane.runs set first_started_at = '2026-03-29 09:20+00';
select is(
    runlane._late_notice(runlane_test.run_of(runlane_test.last_run('agent-late'))),
    '{"scheduled_for": "2026-03-29 09:00 CEST", "started_at": "2026-03-29 11:20 CEST",
      "timezone": "Europe/Berlin", "late_by_minutes": 140}'::jsonb,
    'the notice gives both times in the routine''s zone with its abbreviation'
);

select is(
    current_setting('timezone'),
    (select setting from pg_settings where name = 'TimeZone'),
    'formatting in the routine''s zone leaves the session time zone as it was'
);

update runlane.runs set timer_routine = null;
select is(
    runlane._late_notice(runlane_test.run_of(runlane_test.last_run('agent-late'))), null,
    'an unmarked run never gets a late notice'
);

update runlane.runs
set
    timer_routine = 'agent-late', timer_occurrence = '2026-06-01 03:15+00',
    timer_timezone = 'Asia/Kathmandu', first_started_at = '2026-06-01 04:00+00';
select is(
    runlane._late_notice(runlane_test.run_of(runlane_test.last_run('agent-late'))) ->> 'scheduled_for',
    '2026-06-01 09:00 +0545',
    'a zone without an abbreviation shows its offset'
);

select * from finish();
rollback;
