-- Malformed schedules raise RL006 (with the accepted forms in the HINT), from
-- parse_schedule and from a write to agents.schedule, and the agent row is unchanged.
begin;
select plan(34);

do $$ begin perform runlane_test.scheduled_agent('agent-bad', 'daily at 07:00'); end $$;

create temporary table malformed (schedule text) on commit drop;
insert into malformed (schedule) values
(' '),
(e'\t\n '),
('every 0 hours'),
('every 721 hours'),
('every -1 hours'),
('every 1.5 hours'),
('every hours'),
('daily at 24:00'),
('daily at 9'),
('daily at 09:60'),
('weekly at 24:00'),
('weekly on funday at 09:00'),
('weekly on mon,,thu at 09:00'),
('*/5 * * * *'),
('daily at 09:00; drop table runlane.runs; --'),
(repeat('every 6 hours ', 750));

select
    throws_ok(
        format('select runlane.parse_schedule(%L)', m.schedule),
        'RL006', null,
        format('parse_schedule refuses %s', quote_literal(left(m.schedule, 40)))
    )
from malformed as m;

select
    throws_ok(
        format('update runlane.agents set schedule = %L where agent_id = %L', m.schedule, 'agent-bad'),
        'RL006', null,
        format('writing %s to agents.schedule raises RL006', quote_literal(left(m.schedule, 40)))
    )
from malformed as m;

select results_eq(
    $$select schedule, next_run_at is not null from runlane.agents where agent_id = 'agent-bad'$$,
    $$values ('daily at 07:00'::text, true)$$,
    'after every refused write the agent keeps its schedule and next slot'
);

select matches(
    runlane_test.error_hint($$select runlane.parse_schedule('weekly at 9')$$),
    'every N hours.*daily at HH:MM.*weekly on mon.*weekly at HH:MM',
    'the RL006 hint lists the accepted forms'
);

select * from finish();
rollback;
