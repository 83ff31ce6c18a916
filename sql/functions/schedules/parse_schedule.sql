-- parse_schedule: the one parser of agents.schedule, for a caller without an agent.
--
-- Guarantees: runlane._parse_schedule at now() in UTC (the forms, canonical texts and
-- RL006 are listed there). Only "weekly at HH:MM" depends on the instant and zone: it
-- names the weekday on which the schedule is set, in the schedule's zone, and this
-- function has neither an agent nor a zone, so it answers with today's weekday in UTC.
-- Writing the schedule to an agent (runlane.tg_agents__schedule) resolves it in the
-- owner's zone at the moment of the write, and next_slot(schedule, zone, after) in the
-- given zone on p_after's day. Security definer only so callers need no grant on the
-- private helper; it reads no table.
create or replace function runlane.parse_schedule(p_schedule text)
returns jsonb
language sql
stable
parallel safe
security definer
set search_path = pg_catalog, pg_temp
as $$
    select runlane._parse_schedule(p_schedule, 'UTC', now());
$$;

comment on function runlane.parse_schedule(text) is
'Normalizes a schedule (manual, every N hours, daily at HH:MM, weekly on <days> at HH:MM, weekly at HH:MM '
'= today''s weekday in UTC) to jsonb with its canonical text, or raises RL006 with the accepted forms.';

revoke all on function runlane.parse_schedule(text) from public;
grant execute on function runlane.parse_schedule(text) to runlane_api, runlane_worker;
