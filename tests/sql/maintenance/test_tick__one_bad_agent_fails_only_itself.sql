-- tick: an agent whose next_run_at points at an occurrence that already fired (its
-- timer run exists, so the new one collides with 23505) fails only itself: it is
-- journaled as skipped (tick_failed) and its next_run_at advances, and every other due
-- agent fires in the same tick.
begin;
select plan(7);

do $$ begin perform runlane_test.scheduled_agent('agent-bad', 'daily at 09:00', null, 'UTC', 'org-bad'); end $$;
do $$ begin perform runlane_test.scheduled_agent('agent-good', 'daily at 09:00', null, 'UTC', 'org-good'); end $$;

-- agent-bad fires its 09:00 occurrence, and that run finishes.
do $$ begin perform runlane_test.due('agent-bad', '2026-05-03 09:00+00'); end $$;
do $$ begin perform runlane_test.due('agent-good', '2026-05-04 09:00+00'); end $$;
do $$ begin perform runlane.tick('2026-05-03 10:00+00'); end $$;
update runlane.runs set state = 'succeeded', finished_at = now()
where agent_id = 'agent-bad' and state = 'queued';

-- The bad row: next_run_at moved back to the occurrence that already fired.
do $$ begin perform runlane_test.due('agent-bad', '2026-05-03 09:00+00'); end $$;
do $$ begin perform runlane_test.due('agent-good', '2026-05-03 09:00+00'); end $$;

create temporary table ev (event text, agent_id text, run_id bigint, occurrence timestamptz) on commit drop;
select lives_ok(
    $$insert into ev select * from runlane.tick('2026-05-03 10:30+00')$$,
    'a tick with one bad agent does not abort'
);
select results_eq(
    $$select event, agent_id from ev order by agent_id$$,
    $$values ('run.skipped'::text, 'agent-bad'::text), ('routine.fired'::text, 'agent-good'::text)$$,
    'the good agent fires; the bad one is reported skipped'
);
select results_eq(
    $$select r.state, r.reason, r.trigger from runlane.runs as r inner join ev on r.run_id = ev.run_id where ev.agent_id = 'agent-bad'$$,
    $$values ('skipped'::text, 'tick_failed'::text, 'scheduled'::text)$$,
    'the bad agent gets a skipped run with reason tick_failed'
);
select is(
    (
        select e.detail ->> 'sqlstate'
        from runlane.run_events as e inner join ev on e.run_id = ev.run_id
        where ev.agent_id = 'agent-bad' and e.event = 'run.skipped'
    ),
    '23505',
    'the journal row names the failure''s SQLSTATE'
);
select is(
    (select next_run_at from runlane.agents where agent_id = 'agent-bad'),
    '2026-05-04 09:00+00'::timestamptz,
    'the bad agent''s next_run_at advances past now, so the next tick does not fail on it again'
);
select is(
    (select count(*)::int from runlane.runs where agent_id = 'agent-bad' and timer_occurrence = '2026-05-03 09:00+00'),
    1,
    'the occurrence that already fired still has exactly its one run'
);
select is(
    (select count(*)::int from runlane.tick('2026-05-03 10:30+00')), 0,
    'the next tick finds nothing due'
);

select * from finish();
rollback;
